"""Batch samplers: real Poisson sampling in fixed shapes, and shuffling.

Privacy amplification by subsampling (DP-ZO Alg. 1 line 3; Balle et al.
2018) needs *Poisson* sampling: every example joins a step's batch
independently with probability ``p``. The realized batch size is random, but
``jax.jit`` wants fixed shapes, so :class:`PoissonSampler` pads each batch to
a fixed ``capacity`` and returns a boolean ``mask``; padded slots never
contribute to a sum (see :func:`zoprivacy.mechanisms.masked_sum`). Nothing is
ever dropped: a batch larger than the capacity (probability below
``overflow_probability``) is padded to a larger shape instead, which costs a
recompilation, not privacy.

:class:`ShuffleSampler` draws fixed-size batches without replacement from
epoch permutations, for non-private baselines. Each sampler names its
``scheme`` so the accountant knows which analysis applies.

Both samplers are pure functions of ``(seed, step)``: the batch of step ``t``
is the same whether or not the run was interrupted and resumed before it.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
from scipy import stats

from zoprivacy import validation


class IndexBatch(NamedTuple):
  """Indices into the dataset (``[capacity]``) and the real-example mask."""
  indices: np.ndarray
  mask: np.ndarray


def poisson_capacity(dataset_size: int, sampling_probability: float,
                     overflow_probability: float = 1e-9,
                     multiple: int = 8) -> int:
  """Smallest multiple of ``multiple`` whose Binomial(n, p) tail is tiny."""
  quantile = stats.binom.isf(overflow_probability, dataset_size,
                             sampling_probability)
  size = max(int(quantile) + 1, 1)
  return min(int(math.ceil(size / multiple) * multiple),
             int(math.ceil(dataset_size / multiple) * multiple))


class PoissonSampler:
  """Poisson sampling with fixed-shape padded batches.

  Step ``t`` includes each of the ``dataset_size`` examples independently
  with probability ``p = expected_batch_size / dataset_size``, using a
  generator seeded by ``(seed, t)``.
  """
  scheme = "poisson"

  def __init__(self, dataset_size: int, expected_batch_size: float, *,
               seed: int, overflow_probability: float = 1e-9):
    self.expected_batch_size, self.dataset_size = (
        validation.batch_size_and_dataset(expected_batch_size, dataset_size))
    self.sampling_probability = self.expected_batch_size / self.dataset_size
    self.seed = int(seed)
    self.capacity = poisson_capacity(self.dataset_size,
                                     self.sampling_probability,
                                     overflow_probability)

  def batch_indices(self, step: int) -> IndexBatch:
    rng = np.random.default_rng([self.seed, int(step)])
    chosen = np.flatnonzero(
        rng.random(self.dataset_size) < self.sampling_probability)
    if chosen.size > self.capacity:
      new_capacity = int(math.ceil(chosen.size / 8) * 8)
      warnings.warn(
          f"Poisson batch of {chosen.size} examples exceeds the padded "
          f"capacity {self.capacity}; growing it to {new_capacity} (one "
          "recompilation, no example dropped).")
      self.capacity = new_capacity
    indices = np.zeros(self.capacity, np.int32)
    indices[:chosen.size] = chosen
    mask = np.zeros(self.capacity, bool)
    mask[:chosen.size] = True
    return IndexBatch(indices, mask)


class ShuffleSampler:
  """Fixed-size batches without replacement, reshuffled every epoch.

  Not Poisson sampling: its privacy analysis differs (sampling without
  replacement, replace-one), and the accountant is told via ``scheme``.
  The last incomplete batch of each epoch is dropped.
  """
  scheme = "shuffle"

  def __init__(self, dataset_size: int, batch_size: int, *, seed: int):
    self.batch_size = validation.positive_int("batch_size", batch_size)
    self.dataset_size = validation.positive_int("dataset_size", dataset_size)
    if self.batch_size > self.dataset_size:
      raise ValueError(f"batch_size ({batch_size}) exceeds the dataset "
                       f"({dataset_size}).")
    self.expected_batch_size = float(self.batch_size)
    self.sampling_probability = self.batch_size / self.dataset_size
    self.capacity = self.batch_size
    self.seed = int(seed)
    self.batches_per_epoch = self.dataset_size // self.batch_size

  def batch_indices(self, step: int) -> IndexBatch:
    epoch, position = divmod(int(step), self.batches_per_epoch)
    perm = np.random.default_rng([self.seed, epoch]).permutation(
        self.dataset_size)
    start = position * self.batch_size
    indices = perm[start:start + self.batch_size].astype(np.int32)
    return IndexBatch(indices, np.ones(self.batch_size, bool))


def gather(arrays, indices: np.ndarray):
  """Gathers ``indices`` from every array of a pytree of numpy arrays."""
  if isinstance(arrays, dict):
    return {k: gather(v, indices) for k, v in arrays.items()}
  if isinstance(arrays, (tuple, list)):
    return type(arrays)(gather(v, indices) for v in arrays)
  return arrays[indices]
