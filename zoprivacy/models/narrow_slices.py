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
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def is_narrow(x) -> bool:
  """A 16-bit floating array (bfloat16, float16)."""
  dtype = jnp.result_type(x)
  return jnp.issubdtype(dtype, jnp.floating) and dtype.itemsize == 2


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


def index_layer(stacked, index):
  """Layer ``index`` of every ``[L, ...]`` leaf of ``stacked`` (for the body
  of a scan over the layer indices, which closes over the stacks)."""
  stacked, index = _pinned(stacked, index)
  return jax.tree.map(
    lambda x: _unbits(
      jax.lax.dynamic_index_in_dim(_bits(x), index, keepdims=False), x.dtype
    ),
    stacked,
  )


def dynamic_slice_in_dim(x, start, size: int, axis: int = 0):
  """``lax.dynamic_slice_in_dim`` that never upcasts a 16-bit ``x``."""
  x, start = _pinned(x, start)
  part = jax.lax.dynamic_slice_in_dim(_bits(x), start, size, axis=axis)
  return _unbits(part, x.dtype)


def take_rows(table, ids):
  """``table[ids]`` (rows of a ``[V, D]`` table), gathered as bits."""
  table, ids = _pinned(table, ids)
  return _unbits(jnp.take(_bits(table), ids, axis=0), table.dtype)
