"""Prompt-based masked-LM classification for RoBERTa checkpoints.

Paper settings served: PAZO setting (4) (RoBERTa-base, MNLI, few-shot 512 per
class, SNLI public data), DPZero and DP-ZO (RoBERTa-large on SST-2, SNLI, MNLI,
...), all following MeZO / LM-BFF prompt-based fine-tuning: the input is a
template with one ``<mask>`` (e.g. ``premise?<mask>, hypothesis`` for MNLI,
see :mod:`zoprivacy.data.loaders.text`), and the class logits are the masked-LM
logits of the label words (`` Yes``/`` Maybe``/`` No``) at the mask position.

:class:`RobertaMaskedLM` is the encoder with RoBERTa's LM head (dense -> GELU ->
LayerNorm -> decoder tied to the word embeddings, plus an output bias).
:class:`PromptMLMClassifier` computes only the label-word rows of the decoder,
at the mask position. Weights load from Hugging Face ``RobertaForMaskedLM``
safetensors (``roberta.*`` and ``lm_head.*`` tensors) with
:func:`load_roberta_mlm`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.models.bert import (
  BertConfig,
  BertEncoder,
  dense_from_hf,
  encoder_params_from_hf,
  layer_norm_from_hf,
  read_safetensors,
)


class RobertaLMHead(nn.Module):
  """``dense -> gelu -> LayerNorm``; the caller applies the tied decoder."""

  config: BertConfig

  @nn.compact
  def __call__(self, states):
    h = nn.gelu(
      nn.Dense(self.config.hidden_size, name="dense")(states),
      approximate=False,
    )
    return nn.LayerNorm(epsilon=self.config.layer_norm_eps, name="layer_norm")(
      h
    )


class RobertaMaskedLM(nn.Module):
  """Full-vocabulary masked-LM logits ``[..., L, vocab]``."""

  config: BertConfig

  @nn.compact
  def __call__(self, input_ids, attention_mask=None):
    encoder = BertEncoder(self.config, name="encoder")
    states = encoder(input_ids, attention_mask)
    h = RobertaLMHead(self.config, name="lm_head")(states)
    emb = jnp.asarray(
      encoder.variables["params"]["embeddings"]["word_embeddings"]["embedding"]
    )
    bias = self.param(
      "lm_bias", nn.initializers.zeros, (self.config.vocab_size,)
    )
    return h @ emb.T + bias


class PromptMLMClassifier(nn.Module):
  """Class logits ``[..., num_labels]`` = masked-LM logits of ``label_word_ids``
  at the (single) position where ``input_ids == mask_token_id``. Parameters
  are identical to :class:`RobertaMaskedLM`'s, so the same pytree serves both."""

  config: BertConfig
  label_word_ids: tuple[int, ...]
  mask_token_id: int

  @nn.compact
  def __call__(self, input_ids, attention_mask=None):
    encoder = BertEncoder(self.config, name="encoder")
    states = encoder(input_ids, attention_mask)
    pos = jnp.argmax(input_ids == self.mask_token_id, axis=-1)
    at_mask = jnp.take_along_axis(states, pos[..., None, None], axis=-2)[
      ..., 0, :
    ]
    h = RobertaLMHead(self.config, name="lm_head")(at_mask)
    emb = jnp.asarray(
      encoder.variables["params"]["embeddings"]["word_embeddings"]["embedding"]
    )
    bias = self.param(
      "lm_bias", nn.initializers.zeros, (self.config.vocab_size,)
    )
    ids = jnp.asarray(self.label_word_ids)
    return h @ emb[ids].T + bias[ids]


def mlm_params_from_hf(
  tensors: Mapping[str, np.ndarray], config: BertConfig
) -> dict:
  """Params of :class:`RobertaMaskedLM` / :class:`PromptMLMClassifier` from
  ``RobertaForMaskedLM`` tensors. The decoder must be tied to the word
  embeddings (as in all RoBERTa checkpoints); an untied ``lm_head.decoder.weight``
  raises ``ValueError``."""
  enc = encoder_params_from_hf(tensors, config)
  missing = [
    k
    for k in (
      "lm_head.dense.weight",
      "lm_head.dense.bias",
      "lm_head.layer_norm.weight",
      "lm_head.layer_norm.bias",
    )
    if k not in tensors
  ]
  if missing:
    raise KeyError(f"checkpoint lacks masked-LM head tensors {missing}")
  if "lm_head.bias" in tensors:
    bias = tensors["lm_head.bias"]
  elif "lm_head.decoder.bias" in tensors:
    bias = tensors["lm_head.decoder.bias"]
  else:
    raise KeyError("checkpoint lacks lm_head.bias")
  dec = tensors.get("lm_head.decoder.weight")
  if dec is not None and not np.array_equal(
    dec, np.asarray(enc["embeddings"]["word_embeddings"]["embedding"])
  ):
    raise ValueError(
      "lm_head.decoder.weight is not tied to the word embeddings"
    )
  return jax.tree.map(
    jnp.asarray,
    {
      "encoder": enc,
      "lm_head": {
        "dense": dense_from_hf(tensors, "lm_head.dense"),
        "layer_norm": layer_norm_from_hf(tensors, "lm_head.layer_norm"),
      },
      "lm_bias": np.asarray(bias),
    },
  )


def load_roberta_mlm(model_dir) -> tuple[BertConfig, dict]:
  """``(config, params)`` from a Hugging Face RoBERTa masked-LM folder
  (``config.json`` + ``model.safetensors``, e.g. ``roberta-base`` /
  ``roberta-large`` converted to safetensors)."""
  model_dir = Path(model_dir)
  config = BertConfig.from_hf(model_dir)
  return config, mlm_params_from_hf(read_safetensors(model_dir), config)


def prompt_classifier(
  config: BertConfig, label_word_ids: Sequence[int], mask_token_id: int
) -> PromptMLMClassifier:
  return PromptMLMClassifier(
    config, tuple(int(i) for i in label_word_ids), int(mask_token_id)
  )
