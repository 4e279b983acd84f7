"""Sums over the batch axis in which padded rows contribute nothing.

Every mechanism privatizes such a sum of per-example contributions already
clipped (:mod:`zoprivacy.mechanisms.clipping`); padding can never reach it.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp


def masked_sum(values: jax.Array, mask: jax.Array | None) -> jax.Array:
  """Sums per-example values over the leading axis; padding contributes 0.

  ``jnp.where`` (not multiplication) keeps a NaN in a padded slot from
  reaching the sum. The sum is a reduction over the batch axis, so a batch
  sharded over devices crosses devices only as this reduced quantity.
  """
  if mask is not None:
    chex.assert_shape(mask, (values.shape[0],))  # one flag per example
    mask = mask.astype(bool).reshape(mask.shape + (1,) * (values.ndim - 1))
    values = jnp.where(mask, values, jnp.zeros_like(values))
  return jnp.sum(values, axis=0)


def masked_tree_sum(tree, mask: jax.Array | None):
  """:func:`masked_sum` over every leaf of a per-example pytree."""
  return jax.tree.map(lambda x: masked_sum(x, mask), tree)
