"""A causal LM's token embedding and LM head perturbed where they are
used, never copied.

In a causal LM the token embedding is the largest single leaf (OPT-125m:
50272 x 768, 147 MiB in float32) and, tied, it is used twice: rows are
gathered for the input tokens, and the whole table is the LM head (an untied
head, Llama's ``lm_head`` ``[D, V]`` kernel, is as large). Perturbing them
as leaves (``E + l u``) would hold a full copy per forward pass. Here:

* the input rows are ``E[ids] + l u[ids]``: each token's row of ``u`` is
  regenerated from its flat positions ``id * D ... id * D + D - 1``;
* the head is applied in vocabulary chunks of ``C`` rows inside a
  ``lax.scan`` (:mod:`zoprivacy.models.chunked_head`): chunk ``c`` forms
  ``E_c + l u_c`` (:func:`perturbed_rows`; for a ``[D, V]`` kernel its
  columns, :func:`perturbed_columns`) and multiplies it, so one chunk is
  live at a time, and with the targets known the loss is reduced chunk by
  chunk too, so the logits are never whole.

``u`` is THE direction of the generic step: the same counter hash, leaf
number and positions (:func:`zoprivacy.zo.directions.leaf_slice`,
:func:`~zoprivacy.zo.directions.leaf_at`), and each element is formed as
``E + (l u).astype(E.dtype)`` like :meth:`zoprivacy.models.layer_perturbation.Perturbation.
apply` (for a bfloat16 table, ``float32(E) + l u`` with ``u`` drawn in
float32, the table sliced by :mod:`~zoprivacy.models.narrow_slices`). Used
by :mod:`zoprivacy.models.causal_lm_zo` when the embedding or the head is
trainable.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoprivacy.models import narrow_slices
from zoprivacy.models.chunked_head import ChunkRows
from zoprivacy.zo import counter_positions, directions

EMBED_KEY, TABLE_KEY = "embed_tokens", "embedding"


def split_embedding(tree: dict):
  """``(tree without the token embedding table, the table or None)``."""
  inner = dict(tree.get(EMBED_KEY, {}))
  table = inner.pop(TABLE_KEY, None)
  rest = dict(tree)
  if table is not None:
    if inner:
      rest[EMBED_KEY] = inner
    else:
      rest.pop(EMBED_KEY)
  return rest, table


def with_embedding(tree: dict, table) -> dict:
  """Inverse of :func:`split_embedding`."""
  out = dict(tree)
  out[EMBED_KEY] = {**dict(tree.get(EMBED_KEY, {})), TABLE_KEY: table}
  return out


def _rows_of_u(perturbation, number, first_row, shape, dtype, total):
  """Rows ``first_row ...`` of leaf ``number``'s ``u`` (``total``
  elements), ``shape = (R, D)``."""
  start = counter_positions.row_offset(first_row, shape[-1], total)
  return directions.leaf_slice(
    perturbation.direction,
    perturbation.key,
    number,
    shape,
    dtype,
    start=start,
    prng=perturbation.prng,
  )


def _u_dtype(leaf):
  """float32 for a 16-bit table (perturbed in float32, as
  :meth:`zoprivacy.models.layer_perturbation.Perturbation.apply`), else its own dtype."""
  return jnp.float32 if narrow_slices.is_narrow(leaf) else leaf.dtype


def _plus(part, scale_u):
  """``part + l u`` as the whole leaf forms it."""
  if narrow_slices.is_narrow(part):
    return part.astype(jnp.float32) + scale_u
  return part + scale_u.astype(part.dtype)


def token_rows_delta(perturbation, number: int, table, input_ids):
  """``(l u[ids]).astype(E.dtype)`` ``[..., D]`` (float32 for a 16-bit
  table): added to ``E[ids]`` it gives the rows of the perturbed table,
  element for element."""
  dim = table.shape[-1]
  flat = input_ids.reshape(-1)
  dtype = _u_dtype(table)
  rows = jax.vmap(
    lambda i: _rows_of_u(perturbation, number, i, (dim,), dtype, table.size)
  )(flat)
  delta = (perturbation.scale * rows).astype(dtype)
  return delta.reshape(*input_ids.shape, dim)


def perturbed_rows(perturbation, number: int, table) -> ChunkRows:
  """``chunk_rows(first, size)``: rows ``first ...`` of ``E + l u`` for a
  ``[V, D]`` table, formed for that chunk only (each element exactly as in
  the whole leaf)."""

  def rows(first, size):
    part = narrow_slices.dynamic_slice_in_dim(table, first, size, axis=0)
    shape = (size, table.shape[1])
    u = _rows_of_u(
      perturbation, number, first, shape, _u_dtype(table), table.size
    )
    return _plus(part, perturbation.scale * u)

  return rows


def perturbed_columns(perturbation, number: int, kernel) -> ChunkRows:
  """``chunk_rows(first, size)`` of ``W + l u`` for a ``[D, V]`` kernel:
  its columns ``first ...``, transposed to ``[size, D]`` (element ``(d,
  v)`` of the leaf is flat position ``d * V + v``)."""
  dim, vocab = kernel.shape

  def rows(first, size):
    part = narrow_slices.dynamic_slice_in_dim(kernel, first, size, axis=1)
    columns = jnp.asarray(first, jnp.uint32) + jnp.arange(
      size, dtype=jnp.uint32
    )
    row = jax.lax.iota(jnp.uint32, dim)[:, None]
    rows_start = counter_positions.row_offset(row, vocab, kernel.size)
    positions = counter_positions.plus(rows_start, columns[None, :])
    u = directions.leaf_at(
      perturbation.direction,
      perturbation.key,
      number,
      positions,
      _u_dtype(kernel),
      prng=perturbation.prng,
    )
    return _plus(part, perturbation.scale * u).T

  return rows
