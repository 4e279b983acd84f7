"""Logical batches larger than memory: per-example work in physical chunks.

A private step releases once per *logical* batch, the batch its privacy
plan accounts (one clipped sum, one noise draw, one ledger entry). With a
``physical_batch_size`` ``P`` the per-example work of that step (forward
passes, per-example gradients, their clipping and quantization) runs over
*physical* chunks of ``P`` rows, one after another, so that only one
chunk's activations are live (Opacus' ``BatchMemoryManager``). It is an
execution setting: the plan, the calibration and the noise do not depend
on it.

* :func:`map_rows`: per-example values ``[B, ...]`` (the zeroth-order
  estimators' losses, a few floats per row) computed chunk by chunk and
  put back in row order; the clipped sum and its noise then run on them
  unchanged, so a chunked release equals the unchunked one wherever the
  per-example values do.
* :func:`sum_rows`: sums over the rows (first-order clipped gradients,
  ``[d]`` per row) accumulated chunk by chunk in a ``lax.scan``: on an
  integer lattice the sum is exact, so the release is the unchunked one.

Chunks are strided: of ``n`` chunks, chunk ``j`` holds rows ``j, j + n,
j + 2n, ...``, so that a batch split over devices in contiguous blocks
keeps every chunk split over all of them (``P`` a multiple of the device
count). A batch whose rows are not a multiple of ``P`` is filled with
copies of its first row, masked: they never reach a sum (:func:`sum_rows`
gives them mask ``False``; :func:`map_rows` cuts their values off).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoprivacy.core import validation


def check(physical_batch_size) -> int | None:
  """``None`` (the whole batch at once) or a positive ``int``."""
  if physical_batch_size is None:
    return None
  return validation.positive_int("physical_batch_size", physical_batch_size)


def rows_of(batch) -> int:
  """The rows of ``batch`` (the leading axis of its leaves)."""
  return int(jax.tree.leaves(batch)[0].shape[0])


def num_chunks(rows: int, physical_batch_size: int | None) -> int:
  """How many physical chunks ``rows`` take (1: the batch at once)."""
  if physical_batch_size is None or physical_batch_size >= rows:
    return 1
  return -(-rows // physical_batch_size)


def _strided(tree, chunks: int):
  """Leaves ``[chunks * size, ...]`` viewed as ``[size, chunks, ...]`` (a
  reshape, no copy): chunk ``j`` is ``[:, j]``, rows ``j, j + chunks, ...``
  (strided)."""
  return jax.tree.map(
    lambda x: x.reshape((x.shape[0] // chunks, chunks) + x.shape[1:]), tree
  )


def _chunk(view, j):
  """Chunk ``j`` of a :func:`_strided` view, read in place."""
  return jax.tree.map(
    lambda x: jax.lax.dynamic_index_in_dim(x, j, axis=1, keepdims=False), view
  )


def _filled(tree, extra: int):
  """Leaves with ``extra`` copies of their first row appended."""
  if not extra:
    return tree
  return jax.tree.map(
    lambda x: jnp.concatenate([x, jnp.repeat(x[:1], extra, axis=0)]), tree
  )


def map_rows(fn, batch, physical_batch_size: int | None):
  """``fn(batch)`` (a pytree of per-example ``[B, ...]`` values), computed
  over physical chunks by ``lax.map`` and returned in row order."""
  rows = rows_of(batch)
  chunks = num_chunks(rows, physical_batch_size)
  if chunks == 1:
    return fn(batch)
  size = physical_batch_size
  view = _strided(_filled(batch, chunks * size - rows), chunks)
  out = jax.lax.map(lambda j: fn(_chunk(view, j)), jnp.arange(chunks))
  return jax.tree.map(
    lambda y: jnp.swapaxes(y, 0, 1).reshape((chunks * size,) + y.shape[2:])[
      :rows
    ],
    out,
  )


def chunked_loss(loss, physical_batch_size: int | None):
  """``loss(params, batch) -> [B]`` evaluated over physical chunks."""
  if physical_batch_size is None:
    return loss
  return lambda params, batch: map_rows(
    lambda b: loss(params, b), batch, physical_batch_size
  )


def sum_rows(fn, batch, mask, physical_batch_size: int | None):
  """``(sum over chunks of fn(chunk, chunk_mask), chunks)``.

  ``fn(batch, mask)`` returns sums over its rows (any pytree), in which a
  row whose mask is ``False`` contributes nothing; the chunks' sums are
  added one after another in a ``lax.scan`` (``chunks - 1`` roundings).
  One chunk: ``fn(batch, mask)``.
  """
  rows = rows_of(batch)
  chunks = num_chunks(rows, physical_batch_size)
  if chunks == 1:
    return fn(batch, mask), 1
  size = physical_batch_size
  extra = chunks * size - rows
  if mask is None:
    mask = jnp.ones((rows,), bool)
  mask = jnp.concatenate([mask.astype(bool), jnp.zeros((extra,), bool)])
  view = _strided((_filled(batch, extra), mask), chunks)
  # The total starts at zero: 0 + s is exact, so the sums of the chunks
  # are added with chunks - 1 roundings.
  shapes = jax.eval_shape(fn, *_chunk(view, 0))
  zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

  def add(total, j):
    return jax.tree.map(jnp.add, total, fn(*_chunk(view, j))), None

  total, _ = jax.lax.scan(add, zeros, jnp.arange(chunks))
  return total, chunks
