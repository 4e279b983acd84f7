"""The attention arithmetic shared by the causal LMs (OPT, Llama/Mistral).

``write_cache`` puts a step's keys and values into the decoding cache;
``attend`` is ``softmax(q k^T [* scale] + mask) v`` with the scores and the
softmax in float32 and ``allowed`` ``[B, S, T]`` marking which keys each
query may see (causality, padding, prefixes). The projections, positions
and head layouts stay with each model.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


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
