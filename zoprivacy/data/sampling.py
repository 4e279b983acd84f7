"""Batches for a jitted step: fixed shapes, a mask, and the selection drawn.

The samplers (:class:`PoissonSampler`, ...) live with the batch-selection
value they draw (:mod:`zoprivacy.privacy.batch_selection`) and are read
from here too. :func:`padded_batch` gathers a sampler's
:class:`IndexBatch` into a :class:`Batch`: the data, the mask of real
examples (padded slots never contribute to a sum, see
:func:`zoprivacy.mechanisms.noise.masked_sum`) and the
:class:`~zoprivacy.privacy.batch_selection.BatchSelection` the indices were
drawn under. A :class:`Batch` is a pytree whose leaves are the data and the
mask; the selection is static (aux data), so a private estimator checks it
against its plan when its step is traced, at no cost per step.
"""

from __future__ import annotations

import jax
import numpy as np

from zoprivacy.privacy.batch_selection import (  # noqa: F401 (read from here too)
  FullBatchSampler,
  IndexBatch,
  PoissonSampler,
  ShuffleSampler,
  WithoutReplacementSampler,
  poisson_capacity,
)


class Batch:
  """A fixed-shape batch that carries its mask and how it was drawn.

  Attributes:
    data: a pytree of arrays with a leading batch axis.
    mask: ``[B]`` bool, the real examples (``None``: all of them).
    selection: the :class:`~zoprivacy.privacy.batch_selection.BatchSelection`
      whose sampler drew the rows (``None``: rows from elsewhere, which a
      private estimator accepts only from a value that assumes its
      sampling).

  The estimators read ``mask`` from it, so padding can never be counted by
  forgetting (or misspelling) ``mask=``. ``data, mask = batch`` unpacks it.
  """

  __slots__ = ("data", "mask", "selection")

  def __init__(self, data, mask=None, selection=None):
    self.data, self.mask, self.selection = data, mask, selection

  def __iter__(self):
    return iter((self.data, self.mask))

  def __repr__(self):
    return f"Batch(data={self.data!r}, mask={self.mask!r}, selection={self.selection!r})"

  def replace(self, **changes) -> Batch:
    fields = dict(data=self.data, mask=self.mask, selection=self.selection)
    return Batch(**{**fields, **changes})


PaddedBatch = Batch  # the name of earlier releases


jax.tree_util.register_pytree_with_keys(
  Batch,
  lambda b: (
    (
      (jax.tree_util.GetAttrKey("data"), b.data),
      (jax.tree_util.GetAttrKey("mask"), b.mask),
    ),
    b.selection,
  ),
  lambda selection, children: Batch(*children, selection),
  flatten_func=lambda b: ((b.data, b.mask), b.selection),
)


def gather(arrays, indices: np.ndarray):
  """Gathers ``indices`` from every array of a pytree of numpy arrays."""
  if isinstance(arrays, dict):
    return {k: gather(v, indices) for k, v in arrays.items()}
  if isinstance(arrays, (tuple, list)):
    return type(arrays)(gather(v, indices) for v in arrays)
  return arrays[indices]


def padded_batch(arrays, index_batch: IndexBatch) -> Batch:
  """Gathers an :class:`IndexBatch` into a :class:`Batch` that carries the
  index batch's mask and selection.

  Padding rows are zeros, not copies of a real example: even a loss or a
  metric that ignored the mask would not see any example twice.
  """
  pad = ~np.asarray(index_batch.mask, bool)

  def zero_padding(a):
    a = np.array(a, copy=True)
    a[pad] = 0
    return a

  data = gather(arrays, index_batch.indices)
  if pad.any():
    data = _map(zero_padding, data)
  return Batch(data, index_batch.mask, getattr(index_batch, "selection", None))


def _map(fn, tree):
  if isinstance(tree, dict):
    return {k: _map(fn, v) for k, v in tree.items()}
  if isinstance(tree, (tuple, list)):
    return type(tree)(_map(fn, v) for v in tree)
  return fn(tree)
