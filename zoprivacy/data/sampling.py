"""Batch samplers: real Poisson sampling in fixed shapes, and shuffling.

Privacy amplification by subsampling (DP-ZO Alg. 1 line 3; Balle et al.
2018) needs *Poisson* sampling: every example joins a step's batch
independently with probability ``p``. The realized batch size is random, but
``jax.jit`` wants fixed shapes, so :class:`PoissonSampler` pads each batch to
a fixed ``capacity`` and returns a boolean ``mask``; padded slots never
contribute to a sum (see :func:`zoprivacy.mechanisms.noise.masked_sum`). Nothing
is ever dropped: a batch larger than the capacity (probability below
``overflow_probability``) is padded to a larger shape instead, which costs a
recompilation, not privacy.

:class:`ShuffleSampler` draws fixed-size batches without replacement from
epoch permutations, for non-private baselines.
:class:`WithoutReplacementSampler` draws every step's batch as an
independent uniformly random subset of fixed size (Noisy-ZOSGD, Chien,
Chen & Li App. A.9); :class:`FullBatchSampler` returns the whole dataset.
Each sampler names its ``scheme`` so the accountant knows which analysis
applies.

The Poisson and without-replacement samplers' randomness is SECRET: a batch
known to an adversary gives no amplification by subsampling. It draws from a 256-bit secret (OS
entropy by default, see :mod:`zoprivacy.privacy.randomness`), never from a
config seed; step ``t`` uses a Philox generator keyed by ``(secret, t)``, so
the batch of step ``t`` is the same whether or not the run was interrupted
and resumed (the secret is checkpointed). The shuffling sampler is for
non-private baselines and may be seeded.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
from scipy import stats

from zoprivacy.core import validation
from zoprivacy.privacy import randomness


class IndexBatch(NamedTuple):
  """Indices into the dataset (``[capacity]``) and the real-example mask."""

  indices: np.ndarray
  mask: np.ndarray


def poisson_capacity(
  dataset_size: int,
  sampling_probability: float,
  overflow_probability: float = 1e-9,
  multiple: int = 8,
) -> int:
  """Smallest multiple of ``multiple`` whose Binomial(n, p) tail is tiny."""
  quantile = stats.binom.isf(
    overflow_probability, dataset_size, sampling_probability
  )
  size = max(int(quantile) + 1, 1)
  return min(
    int(math.ceil(size / multiple) * multiple),
    int(math.ceil(dataset_size / multiple) * multiple),
  )


class PoissonSampler:
  """Poisson sampling with fixed-shape padded batches.

  Step ``t`` includes each of the ``dataset_size`` examples independently
  with probability ``p = expected_batch_size / dataset_size``, drawn from
  the secret stream ``(secret, "poisson", t)``.

  Args:
    dataset_size: ``n``.
    expected_batch_size: ``p n``.
    secret: 32 secret bytes (restored from a checkpoint); ``None`` draws a
      fresh secret from OS entropy.
    insecure_test_seed: REPRODUCIBLE batches for tests (warns; not private).
    overflow_probability: probability that a batch exceeds the padded shape.
  """

  scheme = "poisson"

  def __init__(
    self,
    dataset_size: int,
    expected_batch_size: float,
    *,
    secret: bytes | None = None,
    insecure_test_seed: int | None = None,
    overflow_probability: float = 1e-9,
  ):
    self.expected_batch_size, self.dataset_size = (
      validation.batch_size_and_dataset(expected_batch_size, dataset_size)
    )
    self.sampling_probability = self.expected_batch_size / self.dataset_size
    self.secret = _secret(secret, insecure_test_seed)
    self.capacity = poisson_capacity(
      self.dataset_size, self.sampling_probability, overflow_probability
    )

  def batch_indices(self, step: int) -> IndexBatch:
    rng = randomness.numpy_generator(self.secret, "poisson", int(step))
    chosen = np.flatnonzero(
      rng.random(self.dataset_size) < self.sampling_probability
    )
    if chosen.size > self.capacity:
      new_capacity = int(math.ceil(chosen.size / 8) * 8)
      warnings.warn(
        f"Poisson batch of {chosen.size} examples exceeds the padded "
        f"capacity {self.capacity}; growing it to {new_capacity} (one "
        "recompilation, no example dropped).",
        stacklevel=2,
      )
      self.capacity = new_capacity
    indices = np.zeros(self.capacity, np.int32)
    indices[: chosen.size] = chosen
    mask = np.zeros(self.capacity, bool)
    mask[: chosen.size] = True
    return IndexBatch(indices, mask)


def _fixed_batch_size(sampler, dataset_size: int, batch_size: int) -> None:
  """Validates and sets the sizes of a fixed-size-batch sampler."""
  sampler.batch_size = validation.positive_int("batch_size", batch_size)
  sampler.dataset_size = validation.positive_int("dataset_size", dataset_size)
  if sampler.batch_size > sampler.dataset_size:
    raise ValueError(
      f"batch_size ({batch_size}) exceeds the dataset ({dataset_size})."
    )
  sampler.expected_batch_size = float(sampler.batch_size)
  sampler.sampling_probability = sampler.batch_size / sampler.dataset_size
  sampler.capacity = sampler.batch_size


def _secret(secret: bytes | None, insecure_test_seed: int | None) -> bytes:
  """The given secret, OS entropy, or (loudly) the insecure test secret."""
  if secret is None:
    secret = (
      randomness.new_secret()
      if insecure_test_seed is None
      else randomness.insecure_test_secret(insecure_test_seed)
    )
  return randomness.check_secret(secret)


class ShuffleSampler:
  """Fixed-size batches without replacement, reshuffled every epoch.

  Not Poisson sampling: its privacy analysis differs (sampling without
  replacement, replace-one), and the accountant is told via ``scheme``.
  The last incomplete batch of each epoch is dropped.
  """

  scheme = "shuffle"

  def __init__(self, dataset_size: int, batch_size: int, *, seed: int):
    _fixed_batch_size(self, dataset_size, batch_size)
    self.seed = int(seed)
    self.batches_per_epoch = self.dataset_size // self.batch_size

  def batch_indices(self, step: int) -> IndexBatch:
    epoch, position = divmod(int(step), self.batches_per_epoch)
    perm = np.random.default_rng([self.seed, epoch]).permutation(
      self.dataset_size
    )
    start = position * self.batch_size
    indices = perm[start : start + self.batch_size].astype(np.int32)
    return IndexBatch(indices, np.ones(self.batch_size, bool))


class WithoutReplacementSampler:
  """Each step: ``batch_size`` distinct examples, uniformly, independently.

  Unlike :class:`ShuffleSampler` there are no epochs: the batch of step ``t``
  is a uniformly random subset drawn afresh from the SECRET stream
  ``(secret, "without_replacement", t)``, which is the sampling App. A.9 of
  Chien, Chen & Li and Wang, Balle & Kasiviswanathan (2019, Thm. 27)
  analyze (replace-one). Like :class:`PoissonSampler` it takes a secret
  (OS entropy by default), never a config seed.
  """

  scheme = "without_replacement"

  def __init__(
    self,
    dataset_size: int,
    batch_size: int,
    *,
    secret: bytes | None = None,
    insecure_test_seed: int | None = None,
  ):
    _fixed_batch_size(self, dataset_size, batch_size)
    self.secret = _secret(secret, insecure_test_seed)

  def batch_indices(self, step: int) -> IndexBatch:
    rng = randomness.numpy_generator(
      self.secret, "without_replacement", int(step)
    )
    indices = np.sort(
      rng.choice(self.dataset_size, self.batch_size, replace=False)
    ).astype(np.int32)
    return IndexBatch(indices, np.ones(self.batch_size, bool))


class FullBatchSampler:
  """Every step uses all ``dataset_size`` examples (Noisy-ZOGD, eq. (3)).

  It has no randomness; ``secret`` and ``insecure_test_seed`` are accepted
  (and ignored) so that every sampler is built the same way.
  """

  scheme = "full_batch"

  def __init__(
    self,
    dataset_size: int,
    *,
    secret: bytes | None = None,
    insecure_test_seed: int | None = None,
  ):
    del secret, insecure_test_seed
    self.dataset_size = validation.positive_int("dataset_size", dataset_size)
    self.batch_size = self.capacity = self.dataset_size
    self.expected_batch_size = float(self.dataset_size)
    self.sampling_probability = 1.0
    self._batch = IndexBatch(
      np.arange(self.dataset_size, dtype=np.int32),
      np.ones(self.dataset_size, bool),
    )

  def batch_indices(self, step: int) -> IndexBatch:
    del step
    return self._batch


class PaddedBatch(NamedTuple):
  """A fixed-shape batch that carries its own mask of real examples.

  The estimators read ``mask`` from it, so padding can never be counted by
  forgetting (or misspelling) ``mask=``.
  """

  data: object
  mask: np.ndarray


def gather(arrays, indices: np.ndarray):
  """Gathers ``indices`` from every array of a pytree of numpy arrays."""
  if isinstance(arrays, dict):
    return {k: gather(v, indices) for k, v in arrays.items()}
  if isinstance(arrays, (tuple, list)):
    return type(arrays)(gather(v, indices) for v in arrays)
  return arrays[indices]


def padded_batch(arrays, index_batch: IndexBatch) -> PaddedBatch:
  """Gathers an :class:`IndexBatch` into a :class:`PaddedBatch`.

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
  return PaddedBatch(data, index_batch.mask)


def _map(fn, tree):
  if isinstance(tree, dict):
    return {k: _map(fn, v) for k, v in tree.items()}
  if isinstance(tree, (tuple, list)):
    return type(tree)(_map(fn, v) for v in tree)
  return fn(tree)
