"""How each step's batch is chosen: one value, and the samplers it gives.

:class:`BatchSelection` names how batches are chosen (``'poisson'``,
``'without_replacement'``, ``'full_batch'``, or ``'shuffle'`` for
non-private baselines) with the dataset size and the (expected) batch size.
:meth:`BatchSelection.scheme` is the value a :class:`~zoprivacy.PrivacyPlan`
accounts (:mod:`zoprivacy.privacy.sampling_scheme`), and
:meth:`BatchSelection.sampler` the sampler that draws exactly those batches.
Every sampler tags the batches it draws with its selection
(:attr:`IndexBatch.selection`), so a step can check, when it is traced,
that the batch it is given is one its plan accounts
(:meth:`BatchSelection.check_plan`); :func:`for_plan` gives the selection
of a plan.

Poisson sampling (DP-ZO Alg. 1 line 3; Balle et al. 2018) includes every
example independently with probability ``p``. ``jax.jit`` wants fixed
shapes, so :class:`PoissonSampler` pads each batch to a fixed ``capacity``
and returns a boolean ``mask``; padded slots never contribute to a sum.
Nothing is ever dropped: a batch larger than the capacity (probability
below ``overflow_probability``) is padded to a larger shape instead, which
costs a recompilation, not privacy. :class:`WithoutReplacementSampler`
draws every step's batch as an independent uniformly random subset of fixed
size (Noisy-ZOSGD, Chien, Chen & Li App. A.9; replace-one);
:class:`FullBatchSampler` returns the whole dataset; :class:`ShuffleSampler`
draws epoch permutations, for non-private baselines only.

The Poisson and without-replacement samplers' randomness is SECRET: a batch
known to an adversary gives no amplification by subsampling. It draws from
a 256-bit secret (OS entropy by default, see
:mod:`zoprivacy.privacy.randomness`), never from a config seed; step ``t``
uses a Philox generator keyed by ``(secret, t)``, so the batch of step
``t`` is the same whether or not the run was interrupted and resumed.

This module imports no JAX (a config is checked before JAX loads): the
secret streams of :mod:`zoprivacy.privacy.randomness` load when a sampler
draws.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import NamedTuple

import numpy as np

from zoprivacy.core import validation
from zoprivacy.privacy import sampling_scheme

NAMES = ("poisson", "without_replacement", "full_batch", "shuffle")


class BatchSelectionError(ValueError):
  """A selection that cannot draw or account the batches asked for."""


@dataclasses.dataclass(frozen=True)
class BatchSelection:
  """How each step's batch is chosen (see the module docstring).

  Attributes:
    name: one of :data:`NAMES`.
    dataset_size: the number of examples batches are drawn from.
    expected_batch_size: Poisson's expected batch size, the fixed size of
      the other schemes (ignored by ``'full_batch'``).
  """

  name: str
  dataset_size: int
  expected_batch_size: float

  def __post_init__(self):
    if self.name not in NAMES:
      raise BatchSelectionError(
        f"sampling must be one of {NAMES}, got {self.name!r}."
      )

  @property
  def private(self) -> bool:
    """Whether a privacy analysis covers these batches (not shuffling)."""
    return self.name != "shuffle"

  def scheme(self):
    """The sampling scheme the accounting of these batches assumes."""
    if not self.private:
      raise BatchSelectionError(
        "'shuffle' batches have no privacy accounting (one epoch's batches "
        "depend on one another): only for the non-private baseline."
      )
    return sampling_scheme.build(
      self.name,
      expected_batch_size=self._batch_size(),
      dataset_size=self.dataset_size,
    )

  def sampler(self, *, secret: bytes | None = None, seed: int | None = None):
    """The sampler that draws these batches. A private selection draws
    from ``secret`` (256 bits, never a seed); ``'shuffle'`` from ``seed``."""
    if self.name == "shuffle":
      if seed is None:
        raise BatchSelectionError("'shuffle' batches need a seed.")
      return ShuffleSampler(
        self.dataset_size, int(self.expected_batch_size), seed=seed
      )
    if secret is None:
      raise BatchSelectionError(
        f"{self.name!r} batches draw from a secret (OS entropy), not a seed."
      )
    if self.name == "full_batch":
      return FullBatchSampler(self.dataset_size)
    cls = (
      PoissonSampler if self.name == "poisson" else WithoutReplacementSampler
    )
    return cls(self.dataset_size, self._batch_size(), secret=secret)

  def check_plan(self, plan) -> None:
    """Refuses a noised ``plan`` whose accounting assumes other batches
    than this selection draws (scheme, probability or sizes)."""
    if not plan.is_noised:
      return
    if not self.private or not _accounted(plan, self.scheme()):
      raise BatchSelectionError(
        f"The batches drawn ({self.describe()}) are not those the privacy "
        f"plan accounts ({plan.sampling.describe()}): the epsilon it "
        "reports would not hold for them. Draw the batches with the "
        "sampler of the privacy value the estimator was built from "
        "(privacy.sampler()), or build the estimator from a value whose "
        "sampling is the one you draw."
      )

  def describe(self) -> str:
    size = f"{self.expected_batch_size:g}"
    return {
      "poisson": f"Poisson, expected size {size} of {self.dataset_size}",
      "without_replacement": f"fixed size {size} of {self.dataset_size}, "
      "without replacement",
      "full_batch": f"the full batch of {self.dataset_size}",
      "shuffle": f"shuffled fixed size {size} of {self.dataset_size}",
    }[self.name]

  def _batch_size(self):
    if self.name == "poisson":
      return float(self.expected_batch_size)
    if self.name == "full_batch":
      return self.dataset_size
    return int(self.expected_batch_size)


def _same_batches(a, b) -> bool:
  """Whether two sampling schemes account the same batches (a full batch's
  expected size is its dataset's, whatever it was given)."""
  if type(a) is not type(b) or a.dataset_size != b.dataset_size:
    return False
  return (
    a.name == "full_batch" or a.expected_batch_size == b.expected_batch_size
  )


def _accounted(plan, drawn) -> bool:
  """Whether ``plan`` accounts batches drawn by the scheme ``drawn``: the
  same batches, or a subset of a full-batch plan's data set drawn
  independently of the data (no amplification is claimed): Poisson's (one
  example changes one example's membership), or fixed-size batches under
  replace-one (a replaced example changes one row of the batch; under
  add/remove a fixed size would reveal it)."""
  a = plan.sampling
  if _same_batches(a, drawn):
    return True
  if a.name != "full_batch" or a.dataset_size != drawn.dataset_size:
    return False
  replace_one = getattr(plan.neighboring, "name", "") == "REPLACE_ONE"
  return drawn.name == "poisson" or (
    drawn.name == "without_replacement" and replace_one
  )


def for_plan(plan) -> BatchSelection:
  """The selection whose batches ``plan``'s sampling scheme accounts."""
  s = plan.sampling
  if s.dataset_size is None:
    raise BatchSelectionError(
      f"The plan's sampling has no dataset_size: {s.describe()}."
    )
  size = s.expected_batch_size
  return BatchSelection(
    s.name, s.dataset_size, s.dataset_size if size is None else size
  )


# ----------------------------------------------------------------- samplers


class IndexBatch(NamedTuple):
  """Indices into the dataset (``[capacity]``), the real-example mask, and
  the selection the sampler drew them under (``None``: not a sampler's)."""

  indices: np.ndarray
  mask: np.ndarray
  selection: BatchSelection | None = None


def poisson_capacity(
  dataset_size: int,
  sampling_probability: float,
  overflow_probability: float = 1e-9,
  multiple: int = 8,
) -> int:
  """Smallest multiple of ``multiple`` whose Binomial(n, p) tail is tiny."""
  from scipy import stats  # pylint: disable=g-import-not-at-top

  quantile = stats.binom.isf(
    overflow_probability, dataset_size, sampling_probability
  )
  size = max(int(quantile) + 1, 1)
  return min(
    int(math.ceil(size / multiple) * multiple),
    int(math.ceil(dataset_size / multiple) * multiple),
  )


def _generator(secret: bytes, purpose: str, step: int):
  # Imported on use: randomness loads JAX, kept out of a config's checks.
  from zoprivacy.privacy import randomness  # pylint: disable=g-import-not-at-top

  return randomness.numpy_generator(secret, purpose, int(step))


def _secret(secret: bytes | None, insecure_test_seed: int | None) -> bytes:
  """The given secret, OS entropy, or (loudly) the insecure test secret."""
  # Imported on use: randomness loads JAX, kept out of a config's checks.
  from zoprivacy.privacy import randomness  # pylint: disable=g-import-not-at-top

  if secret is None:
    secret = (
      randomness.new_secret()
      if insecure_test_seed is None
      else randomness.insecure_test_secret(insecure_test_seed)
    )
  return randomness.check_secret(secret)


class _Sampler:
  """What every sampler shares: its selection, tagged on every batch."""

  scheme = ""

  @property
  def selection(self) -> BatchSelection:
    return BatchSelection(
      self.scheme, self.dataset_size, self.expected_batch_size
    )

  def _tagged(self, indices, mask) -> IndexBatch:
    return IndexBatch(indices, mask, self.selection)


class PoissonSampler(_Sampler):
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
    rng = _generator(self.secret, "poisson", step)
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
    return self._tagged(indices, mask)


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


class ShuffleSampler(_Sampler):
  """Fixed-size batches without replacement, reshuffled every epoch.

  Not Poisson sampling and no subsampling analysis covers it (one epoch's
  batches depend on one another): for non-private baselines only, and a
  private estimator refuses its batches. The last incomplete batch of each
  epoch is dropped.
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
    return self._tagged(indices, np.ones(self.batch_size, bool))


class WithoutReplacementSampler(_Sampler):
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
    rng = _generator(self.secret, "without_replacement", step)
    indices = np.sort(
      rng.choice(self.dataset_size, self.batch_size, replace=False)
    ).astype(np.int32)
    return self._tagged(indices, np.ones(self.batch_size, bool))


class FullBatchSampler(_Sampler):
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
    self._batch = self._tagged(
      np.arange(self.dataset_size, dtype=np.int32),
      np.ones(self.dataset_size, bool),
    )

  def batch_indices(self, step: int) -> IndexBatch:
    del step
    return self._batch
