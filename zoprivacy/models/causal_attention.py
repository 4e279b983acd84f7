"""The attention arithmetic shared by the causal LMs (OPT, Llama/Mistral).

``allowed_keys`` is the causal mask with padding; ``write_cache`` puts a step's keys and values into the decoding cache;
``attend`` is ``softmax(q k^T [* scale] + mask) v`` with the scores and the
softmax in float32 and ``allowed`` ``[B, S, T]`` marking which keys each
query may see (causality, padding, prefixes); ``prepend_prefix`` adds the
trainable prefix keys and values of prefix tuning
(:mod:`zoprivacy.models.prefix_tuning`). The projections, positions and
head layouts stay with each model.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


def allowed_keys(attention_mask):
  """``[B, S, S]``: query ``i`` may see key ``j`` when ``j <= i`` and ``j``
  is a real (unpadded) token."""
  length = attention_mask.shape[-1]
  causal = jnp.tril(jnp.ones((length, length), bool))
  return causal[None] & attention_mask.astype(bool)[:, None, :]


def write_cache(cache, k, v, write_index):
  """``(keys, values, cache)``: with a cache ``(K, V)`` ``[B, T, heads,
  head_dim]``, ``k`` and ``v`` are written at slot ``write_index`` and the
  whole cache is attended to; without one, ``k`` and ``v`` themselves."""
  if cache is None:
    return k, v, None
  start = (0, write_index, 0, 0)
  k = jax.lax.dynamic_update_slice(cache[0], k.astype(cache[0].dtype), start)
  v = jax.lax.dynamic_update_slice(cache[1], v.astype(cache[1].dtype), start)
  return k, v, (k, v)


def attend(q, k, v, allowed, dtype, scale=None):
  """``[B, S, heads * head_dim]`` context of queries ``q`` ``[B, S, heads,
  head_dim]`` over keys/values ``[B, T, heads, head_dim]``; ``scale``
  multiplies the float32 scores (``None``: ``q`` is already scaled)."""
  scores = jnp.einsum("bqhd,bkhd->bhqk", q, k.astype(dtype))
  scores = scores.astype(jnp.float32)
  if scale is not None:
    scores = scores * scale
  scores = jnp.where(allowed[:, None], scores, jnp.finfo(jnp.float32).min)
  weights = jax.nn.softmax(scores, axis=-1).astype(dtype)
  ctx = jnp.einsum("bhqk,bkhd->bqhd", weights, v.astype(dtype))
  return ctx.reshape(ctx.shape[:-2] + (-1,))


def prepend_prefix(module: nn.Module, k, v, allowed, num_tokens: int):
  """Prefix tuning: ``num_tokens`` trainable keys and values, parameters
  ``prefix_keys`` and ``prefix_values`` ``[P, kv_heads * head_dim]`` of
  ``module``, put before the keys and values ``[B, T, kv_heads, head_dim]``
  (after RoPE, so they carry no position); every query may attend to them.
  Returns ``(k, v, allowed)`` with ``T + P`` keys."""
  shape = (num_tokens, k.shape[-2] * k.shape[-1])
  init = nn.initializers.normal(0.02)
  batched = (k.shape[0], num_tokens, *k.shape[2:])
  prefix_k, prefix_v = (
    jnp.broadcast_to(
      module.param(name, init, shape, module.param_dtype).reshape(batched[1:]),
      batched,
    ).astype(k.dtype)
    for name in ("prefix_keys", "prefix_values")
  )
  seen = jnp.ones(allowed.shape[:-1] + (num_tokens,), bool)
  return (
    jnp.concatenate([prefix_k, k], axis=1),
    jnp.concatenate([prefix_v, v], axis=1),
    jnp.concatenate([seen, allowed], axis=-1),
  )
