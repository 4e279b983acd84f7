"""The positions of the first flagged entries of a long boolean vector.

``jnp.nonzero(flags, size=k)`` runs a cumulative sum over the whole
vector; XLA's CPU cumulative sum of 4M entries takes about 0.2 s. The
device sampler needs the positions of a few flagged lanes (its rejected
and undecided candidates) among millions, every step, so
:func:`first_true` counts instead: it packs 32 flags into a word, counts
the bits of each word (``population_count``) and of each block of 32
words, and finds the ``s``-th flagged entry by a binary search over the
block counts, a count over the block's 32 words and a binary search over
the word's bits. Its work is a fixed function of the shapes (no loop runs
longer for some flags than for others): two passes over the packed flags
plus ``O(size log n)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

_WORD = 32
_BLOCK_WORDS = 32
_UPPER = np.triu(np.ones((_BLOCK_WORDS, _BLOCK_WORDS), np.int32))


def _pack(flags):
  """``uint32[n / 32]``: flag ``32 i + b`` is bit ``b`` of word ``i``."""
  bits = flags.reshape(-1, _WORD).astype(jnp.uint32)
  shifts = jnp.arange(_WORD, dtype=jnp.uint32)
  return jnp.sum(bits << shifts, axis=1, dtype=jnp.uint32)  # disjoint bits


def _nth_set_bit(word, n):
  """The position of the ``n``-th (from 0) set bit of ``word`` (which has
  more than ``n`` set bits), by a binary search over prefix counts."""

  def halve(i, pos):
    cand = pos + (16 >> i)
    below = word & ((jnp.uint32(1) << cand.astype(jnp.uint32)) - 1)
    count = jax.lax.population_count(below).astype(n.dtype)
    return jnp.where(count <= n, cand, pos)

  return jax.lax.fori_loop(0, 5, halve, jnp.zeros_like(n))


def _first_above(ends, s):
  """The first index ``k`` with ``ends[k] > s`` (``ends`` nondecreasing;
  the last index if none), by a binary search of fixed length."""
  n = ends.shape[0]
  rounds = max(n - 1, 0).bit_length() + 1
  top = 1 << (rounds - 1)

  def halve(i, lo):
    step = top >> i
    probe = jnp.minimum(lo + step - 1, n - 1)
    return jnp.where(ends[probe] <= s, jnp.minimum(lo + step, n - 1), lo)

  return jax.lax.fori_loop(0, rounds, halve, jnp.zeros_like(s))


def first_true(flags, size: int):
  """``(index int32[size], count int32)``: the positions of the first
  ``size`` true entries of ``flags`` (``bool[n]``), in order, then ``n``
  where there are fewer; ``count`` is the number of true entries."""
  n = flags.shape[0]
  unit = _WORD * _BLOCK_WORDS
  padded = -(-max(n, 1) // unit) * unit
  flags = jnp.pad(flags, (0, padded - n))
  words = _pack(flags)
  counts = jax.lax.population_count(words).astype(jnp.int32)
  counts = counts.reshape(-1, _BLOCK_WORDS)
  within = counts @ _UPPER  # inclusive prefix sums within each block
  block_total = within[:, -1]
  block_end = jnp.cumsum(block_total)  # inclusive
  count = block_end[-1]
  s = jnp.arange(size, dtype=jnp.int32)
  block = _first_above(block_end, s)
  rank = s - (block_end[block] - block_total[block])
  rows = within[block]  # [size, 32]
  word_in_block = jnp.sum(rows <= rank[:, None], axis=1).astype(jnp.int32)
  word_in_block = jnp.minimum(word_in_block, _BLOCK_WORDS - 1)
  prior = jnp.take_along_axis(rows, word_in_block[:, None], axis=1)[:, 0]
  rank_in_word = rank - (prior - counts[block, word_in_block])
  word_index = block * _BLOCK_WORDS + word_in_block
  bit = _nth_set_bit(words[word_index], rank_in_word)
  index = word_index * _WORD + bit
  return jnp.where(s < count, index, n).astype(jnp.int32), count


def as_numpy_reference(flags, size: int) -> np.ndarray:
  """``first_true``'s index by ``numpy`` (tests)."""
  where = np.flatnonzero(np.asarray(flags))[:size]
  return np.concatenate([where, np.full(size - where.size, len(flags))])
