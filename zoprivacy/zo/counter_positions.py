"""Flat element positions of a leaf as two 32-bit words, for leaves of any
size.

The counter hashes (:mod:`zoprivacy.zo.counter_hash`,
:mod:`zoprivacy.zo.counter_hash2`) hash an element's flat position within
its leaf. JAX computes in 32 bits unless ``jax_enable_x64`` is set, so a
position is the pair ``(low, high)``, ``position = high * 2^32 + low``.
A leaf below 2^32 elements (and a slice that ends below 2^32) is numbered
by plain ``uint32`` positions, as it always was; beyond, by
:class:`Positions`: the low words, plus the high word of each position,
which changes slowly (at most once within a row of fewer than 2^32
elements), so that the hashes fold it into their per-leaf key words once
per row rather than once per element, and give exactly the 32-bit words
wherever ``high`` is 0.

A stacked ``[L, ...]`` leaf of 2^32 or more elements (a scanned stack of
48 or 64 OPT layers: 48 x 7168 x 28672 elements) is numbered row by row:
the rows are its leading axes, each row shorter than 2^32, and row ``r``
starts at ``r * row_size``, a 64-bit product formed from 16-bit halves.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

WORD = 2**32  # positions per high word


class Offset(NamedTuple):
  """A flat position ``high * 2^32 + low`` (``uint32`` arrays of one
  shape, or broadcastable)."""

  low: jax.Array
  high: jax.Array


class Positions(NamedTuple):
  """Flat positions beyond 2^32: ``(high + carry) * 2^32 + low``.

  ``low``: ``uint32`` of the positions' shape. ``high``: ``uint32``
  broadcastable to it (a scalar, or one word per row). ``carry``: bool
  broadcastable to ``low``, where a row crosses a multiple of 2^32."""

  low: jax.Array
  high: jax.Array
  carry: jax.Array


def as_offset(start) -> Offset:
  """``start`` as an :class:`Offset`: an :class:`Offset`, a Python or
  NumPy integer of any size, or a traced integer below 2^32."""
  if isinstance(start, Offset):
    return Offset(
      jnp.asarray(start.low, jnp.uint32), jnp.asarray(start.high, jnp.uint32)
    )
  if isinstance(start, int | np.integer):
    start = int(start)
    if start < 0:
      raise ValueError(f"A position is not negative, got {start}.")
    return Offset(np.uint32(start % WORD), np.uint32(start // WORD))
  low = jnp.asarray(start).astype(jnp.uint32)
  return Offset(low, jnp.zeros_like(low))


def add(a: Offset, b: Offset) -> Offset:
  """``a + b`` (below 2^64)."""
  low = jnp.asarray(a.low, jnp.uint32) + b.low
  carry = (low < a.low).astype(jnp.uint32)
  return Offset(low, a.high + b.high + carry)


def product(index, width: int) -> Offset:
  """``index * width`` in 64 bits, for ``uint32`` ``index`` and ``width``
  below 2^32: the four products of their 16-bit halves."""
  if not 0 <= width < WORD:
    raise ValueError(f"A row width below 2^32, got {width}.")
  index = jnp.asarray(index).astype(jnp.uint32)
  i1, i0 = index >> 16, index & np.uint32(0xFFFF)
  w1, w0 = np.uint32(width >> 16), np.uint32(width & 0xFFFF)
  mid = i0 * w1  # each product of halves is below 2^32
  mid_sum = mid + i1 * w0
  mid_carry = (mid_sum < mid).astype(jnp.uint32)  # bit 32 of the middle sum
  low = i0 * w0 + (mid_sum << 16)
  low_carry = (low < (mid_sum << 16)).astype(jnp.uint32)
  high = i1 * w1 + (mid_sum >> 16) + (mid_carry << 16) + low_carry
  return Offset(low, high)


def row_offset(index, width: int, total: int):
  """The flat position ``index * width`` at which row ``index`` (traced)
  of a leaf of ``total`` elements, rows of ``width``, starts: ``uint32``
  where the leaf fits 32 bits (the product it always was), an
  :class:`Offset` beyond."""
  if total <= WORD:
    return jnp.asarray(index).astype(jnp.uint32) * np.uint32(width)
  return product(index, width)


def shifted(offset: Offset, within: jax.Array) -> Positions:
  """The positions ``offset + within`` (``within`` ``uint32``, below
  2^32; ``offset`` broadcastable to it)."""
  low = offset.low + within
  return Positions(low, offset.high, low < offset.low)


def plus(start, within: jax.Array):
  """``start + within`` for ``uint32`` ``within`` below 2^32: ``uint32``
  where ``start`` is (a :func:`row_offset` of a leaf that fits 32 bits),
  :class:`Positions` where it is an :class:`Offset`."""
  if isinstance(start, Offset):
    return shifted(start, within)
  return start + within


def is_wide(size: int, start) -> bool:
  """Whether positions ``start`` to ``start + size - 1`` need two words."""
  if isinstance(start, Offset):
    return True
  if isinstance(start, int | np.integer):
    return int(start) + size > WORD
  return size > WORD  # a traced start is a 32-bit word


def leaf_positions(shape, start=0, *, limit: int = WORD):
  """The flat positions of a leaf's slice of ``shape``, counted from
  ``start`` on: ``uint32`` where they all fit 32 bits, else
  :class:`Positions`.

  ``start``: a Python integer (any size), a traced integer below 2^32, or
  an :class:`Offset`. ``limit``: the longest row (2^32; smaller in tests,
  to number small shapes the way a large leaf is numbered)."""
  shape = tuple(int(n) for n in shape)
  size = math.prod(shape)
  if limit == WORD and not is_wide(size, start):
    positions = jax.lax.iota(jnp.uint32, size).reshape(shape)
    return positions + jnp.asarray(start, jnp.uint32)
  start = as_offset(start)
  split = next(k for k in range(len(shape) + 1) if math.prod(shape[k:]) < limit)
  rows, width = math.prod(shape[:split]), math.prod(shape[split:])
  if rows >= limit:  # one axis of 2^32 or more: rows of 2^16, then reshaped
    return _flat_positions(shape, start, limit)
  ones = (1,) * (len(shape) - split)
  row = jax.lax.iota(jnp.uint32, rows).reshape(shape[:split] + ones)
  within = jax.lax.iota(jnp.uint32, width).reshape((1,) * split + shape[split:])
  return shifted(add(product(row, width), start), within)


def _flat_positions(shape, start: Offset, limit: int) -> Positions:
  """:func:`leaf_positions` of a shape with an axis of ``limit`` or more
  elements: numbered as rows of ``2^16`` (or fewer), flattened, cut to the
  leaf's size and reshaped."""
  size = math.prod(shape)
  width = min(2**16, limit // 2)
  rows = -(-size // width)
  if rows >= limit:
    raise ValueError(f"A leaf of {size} elements exceeds 2^64 positions.")
  wide = leaf_positions((rows, width), start, limit=limit)

  def flat(x):
    return jnp.broadcast_to(x, (rows, width)).reshape(-1)[:size].reshape(shape)

  return Positions(flat(wide.low), flat(wide.high), flat(wide.carry))


def of_words(low, high) -> Positions | jax.Array:
  """Positions given by their two words (``high`` may be a scalar 0:
  the plain ``uint32`` positions ``low``)."""
  if isinstance(high, int) and high == 0:
    return jnp.asarray(low, jnp.uint32)
  low = jnp.asarray(low, jnp.uint32)
  return Positions(low, jnp.asarray(high, jnp.uint32), jnp.zeros((), bool))


def high_key(high, word: jax.Array, mix) -> jax.Array:
  """A key word for the high word ``high``: ``mix(high * (word | 1))``, 0
  exactly where ``high`` is 0 (an odd multiplier and the bijective ``mix``
  keep 0 the only zero), a keyed bijection of ``high`` elsewhere."""
  return mix(jnp.asarray(high, jnp.uint32) * (word | np.uint32(1)))


def per_position(positions: Positions, word: jax.Array, mix) -> jax.Array:
  """:func:`high_key` of each position's high word, computed once per row
  (``high`` and ``high + 1``) and selected by ``carry``."""
  this = high_key(positions.high, word, mix)
  following = high_key(positions.high + np.uint32(1), word, mix)
  return jnp.where(positions.carry, following, this)
