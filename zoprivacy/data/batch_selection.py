"""One batch-selection value: the sampler that draws a step's batch and the
sampling scheme its accounting assumes, from the same fields.

:class:`BatchSelection` names how batches are chosen (``'poisson'``,
``'without_replacement'``, ``'full_batch'``, or ``'shuffle'`` for
non-private baselines) with the dataset size and the (expected) batch size.
:meth:`BatchSelection.scheme` is the value a :class:`~zoprivacy.PrivacyPlan`
accounts (:mod:`zoprivacy.privacy.sampling_scheme`), and
:meth:`BatchSelection.sampler` the sampler that draws exactly those batches
(:mod:`zoprivacy.data.sampling`). A run that draws its batches from the
selection its plan was built with cannot sample one way and account
another: :func:`for_plan` gives the selection of a plan, and
:meth:`BatchSelection.check_plan` refuses a plan that accounts other batches.
"""

from __future__ import annotations

import dataclasses

from zoprivacy.data import sampling
from zoprivacy.privacy import sampling_scheme

# The selections' samplers; 'shuffle' has no scheme: its epochs' batches
# depend on one another, so no subsampling analysis covers it.
_SAMPLERS = {
  "poisson": sampling.PoissonSampler,
  "without_replacement": sampling.WithoutReplacementSampler,
  "full_batch": sampling.FullBatchSampler,
  "shuffle": sampling.ShuffleSampler,
}
NAMES = tuple(_SAMPLERS)


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
    if self.name not in _SAMPLERS:
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
    cls = _SAMPLERS[self.name]
    if self.name == "shuffle":
      if seed is None:
        raise BatchSelectionError("'shuffle' batches need a seed.")
      return cls(self.dataset_size, int(self.expected_batch_size), seed=seed)
    if secret is None:
      raise BatchSelectionError(
        f"{self.name!r} batches draw from a secret (OS entropy), not a seed."
      )
    if self.name == "full_batch":
      return cls(self.dataset_size)
    return cls(self.dataset_size, self._batch_size(), secret=secret)

  def check_plan(self, plan) -> None:
    """Refuses a noised ``plan`` whose accounting assumes other batches
    than this selection draws (scheme, probability or sizes)."""
    if not plan.is_noised:
      return
    if not self.private or not _same_batches(plan.sampling, self.scheme()):
      raise BatchSelectionError(
        f"The batches drawn ({self.name}, expected size "
        f"{self.expected_batch_size:g} of {self.dataset_size}) are not those "
        f"the privacy plan accounts ({plan.sampling.describe()})."
      )

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
