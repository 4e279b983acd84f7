"""The LM head's negative log-likelihood by vocabulary chunks.

A causal LM's loss needs, per position, ``-log softmax(h W^T)[y]`` for the
target token ``y``: one logit row of the vocabulary size ``V`` per position.
In float32 those rows are the largest activation of a fine-tuning step (a
50,272-token head on 64 positions is 12.9 MB, twice for a two-point step,
next to a 42 MB model). Here the head is applied ``C`` rows of ``W`` at a
time inside a ``lax.scan`` with an online log-sum-exp (Milakov & Gimelshein
2018):

    m' = max(m, max_j z_j),   s' = s exp(m - m') + sum_j exp(z_j - m'),
    nll = m + log s - z_y,

so only ``[N, C]`` logits are ever live. The result equals
``-log_softmax(h @ W.T)[y]`` to float32 rounding (tested).

``chunk_rows(first, size) -> [size, D]`` supplies rows ``first ...`` of
``W``; a caller perturbing the head (:mod:`zoprivacy.models.
perturbed_head`) forms each chunk of ``W + l u`` there, so no full
perturbed table exists either. The last chunk is aligned to end at ``V``
and overlaps its predecessor; the overlapping columns are masked out of the
sum and of the target, so each vocabulary entry counts once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from zoprivacy.models import narrow_slices

DEFAULT_CHUNK = 4096

ChunkRows = Callable[[jax.Array, int], jax.Array]


def chunked_nll(
  hidden: jax.Array,
  targets: jax.Array,
  chunk_rows: ChunkRows,
  vocab_size: int,
  chunk: int = DEFAULT_CHUNK,
) -> jax.Array:
  """Float32 ``-log softmax(hidden @ W^T)[targets]``, shape ``targets.shape``.

  ``hidden``: ``[..., D]``; ``targets``: ``[...]`` token ids in
  ``[0, vocab_size)``; ``W``'s rows come from ``chunk_rows`` (module
  docstring), ``chunk`` of them at a time.
  """
  size = min(chunk, vocab_size)
  count = math.ceil(vocab_size / size)
  h = hidden.astype(jnp.float32).reshape(-1, hidden.shape[-1])
  y = targets.reshape(-1).astype(jnp.int32)
  n = h.shape[0]

  def one_chunk(carry, c):
    running_max, running_sum, target_logit = carry
    first = jnp.minimum(c * size, vocab_size - size)
    z = h @ chunk_rows(first, size).astype(jnp.float32).T  # [N, C]
    column = first + jnp.arange(size)
    new = column >= c * size  # not counted by an earlier chunk
    z_new = jnp.where(new, z, -jnp.inf)
    top = jnp.maximum(running_max, jnp.max(z_new, axis=1))
    running_sum = running_sum * jnp.exp(running_max - top) + jnp.sum(
      jnp.exp(z_new - top[:, None]), axis=1
    )
    hit = new & (column == y[:, None])
    target_logit = target_logit + jnp.sum(jnp.where(hit, z, 0.0), axis=1)
    return (top, running_sum, target_logit), None

  init = (
    jnp.full((n,), -jnp.inf, jnp.float32),
    jnp.zeros((n,), jnp.float32),
    jnp.zeros((n,), jnp.float32),
  )
  (top, total, target_logit), _ = jax.lax.scan(
    one_chunk, init, jnp.arange(count)
  )
  return (top + jnp.log(total) - target_logit).reshape(targets.shape)


def chunked_logits(
  hidden: jax.Array,
  chunk_rows: ChunkRows,
  vocab_size: int,
  chunk: int = DEFAULT_CHUNK,
) -> jax.Array:
  """Float32 ``hidden @ W^T`` ``[..., V]``, ``chunk`` rows of ``W`` at a
  time written into the logits in place (the last chunk overlaps the one
  before and rewrites the same values): the whole logits exist, but ``W``
  is only ever formed chunk by chunk (a perturbed head)."""
  size = min(chunk, vocab_size)
  count = math.ceil(vocab_size / size)
  h = hidden.astype(jnp.float32).reshape(-1, hidden.shape[-1])

  def one_chunk(logits, c):
    first = jnp.minimum(c * size, vocab_size - size)
    part = h @ chunk_rows(first, size).astype(jnp.float32).T  # [N, C]
    return jax.lax.dynamic_update_slice_in_dim(logits, part, first, 1), None

  logits = jnp.zeros((h.shape[0], vocab_size), jnp.float32)
  logits, _ = jax.lax.scan(one_chunk, logits, jnp.arange(count))
  return logits.reshape(*hidden.shape[:-1], vocab_size)


def head_logits(
  hidden: jax.Array,
  weight: jax.Array,
  chunk_rows: ChunkRows,
  vocab_size: int,
  chunk: int = DEFAULT_CHUNK,
) -> jax.Array:
  """Float32 logits ``[..., V]`` of an LM head whose rows ``chunk_rows``
  gives (``weight`` is the table or kernel they come from): a float32
  ``weight`` in one product, a 16-bit one by :func:`chunked_logits`, so
  that no whole float32 copy of it exists (the same values: each chunk is
  converted to float32 exactly before its product)."""
  if not narrow_slices.is_narrow(weight):
    rows = chunk_rows(0, vocab_size).astype(jnp.float32)
    return hidden.astype(jnp.float32) @ rows.T
  return chunked_logits(hidden, chunk_rows, vocab_size, chunk)


def table_rows(table: jax.Array) -> ChunkRows:
  """``chunk_rows`` of a ``[V, D]`` table (a tied embedding).

  A bfloat16 table is sliced without a whole float32 copy
  (:mod:`~zoprivacy.models.narrow_slices`)."""
  return lambda first, size: narrow_slices.dynamic_slice_in_dim(
    table, first, size, axis=0
  )


def kernel_rows(kernel: jax.Array) -> ChunkRows:
  """``chunk_rows`` of a ``[D, V]`` Dense kernel (an untied LM head)."""
  return lambda first, size: (
    narrow_slices.dynamic_slice_in_dim(kernel, first, size, axis=1).T
  )
