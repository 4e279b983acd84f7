"""Slices of bfloat16 (or float16) arrays that XLA:CPU does not upcast whole.

XLA's CPU compiler has no bfloat16 ``dynamic-slice``: its
``float-normalization-bf16`` pass rewrites ``dynamic-slice(w)`` on a
``bf16[L, ...]`` stack as ``convert(dynamic-slice(convert_f32(w)))``, and
``while-loop-invariant-code-motion`` then hoists ``convert_f32(w)`` out of
the layer loop. A scan over bfloat16 layers therefore holds a float32 copy
of every stacked leaf (``f32[L, ...]`` in ``compiled.as_text()``), which is
why bfloat16 weights used to *raise* the compiled peak of the layer-wise
step above float32's.

Here a 16-bit float is sliced as its bits: ``bitcast_convert_type(w,
uint16)``, the slice, and the bitcast back, which are exact (no rounding:
the same 16 bits) and which float normalization leaves alone. Inside a loop
the array and the loop index first go through one
``lax.optimization_barrier``, so that the bitcast of the whole stack
depends on the index and is not hoisted (it fuses into the slice and reads
only the slice). Only the slice is then converted to float32, one layer (or
one vocabulary chunk) at a time. float32 and integer arrays are sliced as
before, without a barrier, so their compiled programs are unchanged.

Gradients. A bitcast to integers has a zero derivative in JAX, so each
16-bit slice here is a ``jax.custom_jvp`` whose tangent is the plain slice
of the tangent (a slice is linear): first-order methods (DP-SGD on 16-bit
weights) get the same gradient as through ``lax.dynamic_slice`` /
``jnp.take``, and only the forward value is taken as bits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoprivacy.core.low_precision import is_narrow  # noqa: F401 (re-exported)


def _bits(x):
  return jax.lax.bitcast_convert_type(x, jnp.uint16) if is_narrow(x) else x


def _unbits(bits, dtype):
  if bits.dtype == jnp.uint16 and jnp.dtype(dtype) != jnp.uint16:
    return jax.lax.bitcast_convert_type(bits, dtype)
  return bits


def _pinned(tree, index):
  """``tree`` and ``index`` through one barrier when ``tree`` has a 16-bit
  float leaf (the whole-array bitcast then depends on the index)."""
  if any(is_narrow(x) for x in jax.tree.leaves(tree)):
    return jax.lax.optimization_barrier((tree, index))
  return tree, index


def _differentiable(bits_fn, plain_fn):
  """``bits_fn(x, where)`` (a 16-bit slice taken as bits) with the
  derivative of ``plain_fn(x, where)`` (the same slice taken plainly):
  ``where`` (an index, ids) is not differentiated."""

  @jax.custom_jvp
  def sliced(x, where):
    return bits_fn(x, where)

  @sliced.defjvp
  def _jvp(primals, tangents):
    x, where = primals
    return sliced(x, where), plain_fn(tangents[0], where)

  return sliced


def _index_bits(stacked, index):
  stacked, index = _pinned(stacked, index)
  return jax.tree.map(
    lambda x: _unbits(
      jax.lax.dynamic_index_in_dim(_bits(x), index, keepdims=False), x.dtype
    ),
    stacked,
  )


def _index_plain(stacked, index):
  return jax.tree.map(
    lambda x: jax.lax.dynamic_index_in_dim(x, index, keepdims=False), stacked
  )


_index_layer = _differentiable(_index_bits, _index_plain)


def index_layer(stacked, index):
  """Layer ``index`` of every ``[L, ...]`` leaf of ``stacked`` (for the body
  of a scan over the layer indices, which closes over the stacks)."""
  if not any(is_narrow(x) for x in jax.tree.leaves(stacked)):
    return _index_plain(stacked, index)
  return _index_layer(stacked, index)


def dynamic_slice_in_dim(x, start, size: int, axis: int = 0):
  """``lax.dynamic_slice_in_dim`` that never upcasts a 16-bit ``x``."""
  plain = lambda y, s: jax.lax.dynamic_slice_in_dim(y, s, size, axis=axis)
  if not is_narrow(x):
    return plain(x, start)

  def bits(y, s):
    y, s = _pinned(y, s)
    return _unbits(plain(_bits(y), s), y.dtype)

  return _differentiable(bits, plain)(x, start)


def _take_plain(table, ids):
  return jnp.take(table, ids, axis=0)


def _take_bits(table, ids):
  table, ids = _pinned(table, ids)
  return _unbits(_take_plain(_bits(table), ids), table.dtype)


_take_rows = _differentiable(_take_bits, _take_plain)


def take_rows(table, ids):
  """``table[ids]`` (rows of a ``[V, D]`` table), gathered as bits."""
  if not is_narrow(table):
    return _take_plain(table, ids)
  return _take_rows(table, ids)
