"""A tied token embedding ``E`` perturbed where it is used, never copied.

In a causal LM the token embedding is the largest single leaf (OPT-125m:
50272 x 768, 147 MiB in float32) and it is used twice: rows are gathered
for the input tokens, and the whole table is the LM head. Perturbing it
as a leaf (``E + l u``) would hold a full copy per forward pass. Here:

* the input rows are ``E[ids] + l u[ids]``: each token's row of ``u`` is
  regenerated from its flat positions ``id * D ... id * D + D - 1``;
* the head is computed in vocabulary chunks of ``C`` rows inside a
  ``lax.scan``: chunk ``c`` forms ``E_c + l u_c`` and multiplies it, so one
  chunk is live at a time; with the targets known, the loss is reduced
  chunk by chunk too (:func:`tied_nll`), so the logits are never whole.

``u`` is THE direction of the generic step: the same counter hash, leaf
number and positions (:func:`zoprivacy.directions.leaf_slice`), and each
element is formed as ``E + (l u).astype(E.dtype)`` like
:meth:`zoprivacy.layerwise.Perturbation.apply`. Used by
:mod:`zoprivacy.models.opt_zo` when the embedding is trainable.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from zoprivacy import directions
from zoprivacy.models.chunked_head import DEFAULT_CHUNK, ChunkRows, chunked_nll

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


def _rows_of_u(perturbation, number, first_row, shape, dtype):
  """Rows ``first_row ...`` of leaf ``number``'s ``u``, ``shape = (R, D)``."""
  start = jnp.asarray(first_row, jnp.uint32) * jnp.uint32(shape[-1])
  return directions.leaf_slice(
    perturbation.direction,
    perturbation.key,
    number,
    shape,
    dtype,
    start=start,
  )


def token_rows_delta(perturbation, number: int, table, input_ids):
  """``(l u[ids]).astype(E.dtype)`` ``[..., D]``: added to ``E[ids]`` it
  gives the rows of the perturbed table, element for element."""
  dim = table.shape[-1]
  flat = input_ids.reshape(-1)
  rows = jax.vmap(
    lambda i: _rows_of_u(perturbation, number, i, (dim,), table.dtype)
  )(flat)
  delta = (perturbation.scale * rows).astype(table.dtype)
  return delta.reshape(*input_ids.shape, dim)


def perturbed_rows(perturbation, number: int, table) -> ChunkRows:
  """``chunk_rows(first, size)``: rows ``first ...`` of ``E + l u``, formed
  for that chunk only (each element exactly as in the whole leaf)."""

  def rows(first, size):
    part = jax.lax.dynamic_slice_in_dim(table, first, size, axis=0)
    shape = (size, table.shape[1])
    u = _rows_of_u(perturbation, number, first, shape, table.dtype)
    return part + (perturbation.scale * u).astype(part.dtype)

  return rows


def tied_nll(
  hidden, targets, table, perturbation, number: int, chunk: int = DEFAULT_CHUNK
):
  """Float32 ``-log softmax(hidden @ (E + l u)^T)[targets]``, by chunks of
  the perturbed table (:func:`~zoprivacy.models.chunked_head.chunked_nll`):
  neither the perturbed table nor the logits exist whole."""
  rows = perturbed_rows(perturbation, number, table)
  return chunked_nll(hidden, targets, rows, table.shape[0], chunk)


def tied_logits(
  hidden, table, perturbation, number: int, chunk: int = DEFAULT_CHUNK
):
  """Float32 ``hidden @ (E + l u)^T`` ``[..., V]``, ``C = chunk`` rows of
  the perturbed table at a time, written into the logits in place (the
  last chunk overlaps the one before and rewrites the same values)."""
  vocab, _ = table.shape
  size = min(chunk, vocab)
  count = math.ceil(vocab / size)
  h = hidden.astype(jnp.float32).reshape(-1, hidden.shape[-1])
  rows = perturbed_rows(perturbation, number, table)

  def one_chunk(logits, c):
    first = jnp.minimum(c * size, vocab - size)
    part = h @ rows(first, size).astype(jnp.float32).T  # [N, C]
    return jax.lax.dynamic_update_slice_in_dim(logits, part, first, 1), None

  logits = jnp.zeros((h.shape[0], vocab), jnp.float32)
  logits, _ = jax.lax.scan(one_chunk, logits, jnp.arange(count))
  return logits.reshape(*hidden.shape[:-1], vocab)
