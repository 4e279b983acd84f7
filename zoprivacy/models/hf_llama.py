"""Hugging Face Llama / Mistral checkpoints for :mod:`zoprivacy.models.llama`.

The same loader design as OPT's (:mod:`zoprivacy.models.hf_checkpoint`):
``config.json`` plus ``model.safetensors`` or a sharded index, tensor names
mapped to the Flax tree (linear weights transposed, per-layer tensors
stacked for the scan), the first mismatching tensor named. Tensors::

  model.embed_tokens.weight                      [vocab, hidden]
  model.layers.N.self_attn.{q,k,v,o}_proj.weight [out, in]
  model.layers.N.mlp.{gate,up,down}_proj.weight  [out, in]
  model.layers.N.{input,post_attention}_layernorm.weight
  model.norm.weight
  lm_head.weight                                 (absent when tied)
"""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp

from zoprivacy.models.hf_checkpoint import (
  SafetensorsCheckpoint,
  params_from_names,
  read_hf_config,
)
from zoprivacy.models.llama import LlamaConfig, LlamaForCausalLM

_LINEARS = tuple(f"self_attn.{n}_proj" for n in "qkvo") + tuple(
  f"mlp.{n}_proj" for n in ("gate", "up", "down")
)
_NORMS = ("input_layernorm", "post_attention_layernorm")


def llama_tensor_names(config: LlamaConfig, prefix: str = "model.") -> dict:
  """``{flax path: HF name (or per-layer names, to stack)}``."""
  layers = range(config.num_hidden_layers)
  per_layer = lambda sub: [f"{prefix}layers.{i}.{sub}" for i in layers]
  out = {
    ("embed_tokens", "embedding"): prefix + "embed_tokens.weight",
    ("norm", "scale"): prefix + "norm.weight",
  }
  for lin in _LINEARS:
    out[("layers", *lin.split("."), "kernel")] = per_layer(lin + ".weight")
  for norm in _NORMS:
    out[("layers", norm, "scale")] = per_layer(norm + ".weight")
  if not config.tie_word_embeddings:
    out[("lm_head", "kernel")] = "lm_head.weight"
  return out


def llama_params_from_hf(
  checkpoint, config: LlamaConfig, *, param_dtype=jnp.float32
) -> dict:
  """Flax params of :class:`LlamaForCausalLM` from HF tensors (a
  :class:`SafetensorsCheckpoint` or a dict of numpy arrays)."""
  model = LlamaForCausalLM(config, param_dtype=param_dtype)
  wanted = llama_tensor_names(config)
  return params_from_names(checkpoint, wanted, model, param_dtype, "Llama")


def load_llama(
  model_dir, *, param_dtype=jnp.float32
) -> tuple[LlamaConfig, dict]:
  """``(config, params)`` of a Hugging Face Llama or Mistral folder."""
  config = LlamaConfig.from_hf(read_hf_config(Path(model_dir)))
  checkpoint = SafetensorsCheckpoint(model_dir)
  return config, llama_params_from_hf(
    checkpoint, config, param_dtype=param_dtype
  )
