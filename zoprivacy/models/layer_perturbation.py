"""The layer-by-layer perturbation ``x + scale * u`` of a stacked model.

A model whose layers are one scan over stacked ``[L, ...]`` parameters
perturbs each layer inside the scan body with :class:`Perturbation`, drawn
leaf by leaf by the counter hash (:func:`zoprivacy.zo.directions.leaf_slice`);
:mod:`zoprivacy.training.layerwise` (the training step) builds it, the models
(:mod:`zoprivacy.models.causal_lm_zo`) apply it. It lives with the models
so that model code never imports the training algorithm.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from zoprivacy.core import low_precision
from zoprivacy.zo import counter_positions
from zoprivacy.zo import directions as directions_lib


class Perturbation(NamedTuple):
  """``x + scale * u(key)`` for the counter-hash direction ``direction``,
  drawn by the counter hash ``prng`` (``'counter'`` or ``'counter2'``)."""

  direction: str
  key: jax.Array
  scale: Any
  prng: str = "counter"

  def _add(self, leaf, number, start=0):
    u = directions_lib.leaf_slice(
      self.direction,
      self.key,
      number,
      jnp.shape(leaf),
      perturbation_dtype(leaf),
      start=start,
      prng=self.prng,
    )
    # exactly queries.perturb: float32(w) + l u for a 16-bit w (l = 1e-3
    # added in bfloat16 would be rounded away; the result feeds a float32
    # forward pass), else p + (scale * u).astype(p.dtype)
    return low_precision.perturbed(leaf, self.scale * u)

  def apply(self, tree, numbers):
    """Whole leaves (the non-scanned part): leaf ``numbers[i]`` of ``u``."""
    return jax.tree.map(self._add, tree, numbers)

  def apply_layer(self, layer_tree, numbers, layer, num_layers: int):
    """One layer's slices ``[...]`` of stacked leaves ``[L, ...]``: the
    elements ``layer * size .. (layer + 1) * size - 1`` of each leaf of
    ``u``, i.e. the same slice of the full draw. ``num_layers``: ``L`` (a
    stack of 2^32 elements or more starts its layers at 64-bit
    positions)."""

    def add(leaf, number):
      size = math.prod(jnp.shape(leaf))
      total = size * num_layers
      start = counter_positions.row_offset(layer, size, total)
      return self._add(leaf, number, start)

    return jax.tree.map(add, layer_tree, numbers)


def perturbation_dtype(leaf):
  """The dtype ``u`` is drawn in for ``leaf``: float32 for 16-bit float
  leaves (perturbed and updated in float32), else the leaf's own."""
  return low_precision.compute_dtype(leaf)


def leaf_numbers(tree):
  """A tree like ``tree`` holding each leaf's index in ``jax.tree.leaves``."""
  leaves, treedef = jax.tree.flatten(tree)
  return jax.tree.unflatten(treedef, list(range(len(leaves))))


def split_stacked(tree, stacked_key: str):
  """``(outer, stacked)``: a dict tree without / with its ``stacked_key``
  entry (``{}`` when absent)."""
  tree = {} if tree is None else dict(tree)
  stacked = tree.pop(stacked_key, {})
  return tree, stacked


# perturbed_loss(trainable, frozen, batch, perturbation) -> [B] losses at
# the parameters assembled from ``trainable + scale * u`` and ``frozen``.
PerturbedLoss = Callable[[Any, Any, Any, Perturbation], jax.Array]
