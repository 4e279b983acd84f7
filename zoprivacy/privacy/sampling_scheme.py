"""How a step's batch is drawn, as a value the privacy plan holds.

:class:`PoissonSampling` (each example independently with probability
``expected_batch_size / dataset_size``), :class:`FullBatch` (every example,
every step) and :class:`WithoutReplacement` (a fixed-size batch; dp_accounting's
PLD does not cover it, so a plan using it is refused when accounted). Each
wraps a mechanism's one-release event into the step's event.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from zoprivacy.core import validation


class SamplingError(ValueError):
  """The sampling probability is unknown or impossible."""


@dataclasses.dataclass(frozen=True)
class _Sampling:
  name: ClassVar[str]
  # Whether ``wrap`` puts a sampling event around the mechanism's event.
  subsampled: ClassVar[bool] = True
  expected_batch_size: float | None = None
  dataset_size: int | None = None

  @property
  def probability(self) -> float:
    if self.dataset_size is None or self.expected_batch_size is None:
      raise SamplingError(
        "The plan needs dataset_size and expected_batch_size "
        f"for its {self.label} sampling probability."
      )
    if self.expected_batch_size > self.dataset_size:
      raise SamplingError(
        f"expected_batch_size ({self.expected_batch_size}) "
        f"exceeds dataset_size ({self.dataset_size})."
      )
    return self.expected_batch_size / self.dataset_size

  label: ClassVar[str] = ""

  def describe(self) -> str:
    if self.dataset_size is None:
      return f"{self.label} sampling (p unknown: no dataset_size)"
    return f"{self.label} sampling p={self.probability:.5g}"

  def to_dict(self) -> dict[str, Any]:
    return {"name": self.name, **dataclasses.asdict(self)}


@dataclasses.dataclass(frozen=True)
class PoissonSampling(_Sampling):
  name: ClassVar[str] = "poisson"
  label: ClassVar[str] = "Poisson"

  def describe(self) -> str:
    """What the accounting assumes, and how to draw batches that meet it."""
    return (
      f"{super().describe()} (assumes each example joins each batch "
      "independently: zoprivacy.PoissonSampler)"
    )

  def wrap(self, event):
    import dp_accounting  # pylint: disable=g-import-not-at-top

    return dp_accounting.PoissonSampledDpEvent(self.probability, event)

  def pld_probability(self) -> float:
    """The probability a mechanism's ``pld`` hook is subsampled at."""
    return self.probability


@dataclasses.dataclass(frozen=True)
class FullBatch(_Sampling):
  name: ClassVar[str] = "full_batch"
  subsampled: ClassVar[bool] = False

  @property
  def probability(self) -> float:
    return 1.0

  def wrap(self, event):
    return event

  def pld_probability(self) -> float:
    return 1.0

  def describe(self) -> str:
    return "full batch"


@dataclasses.dataclass(frozen=True)
class WithoutReplacement(_Sampling):
  name: ClassVar[str] = "without_replacement"
  label: ClassVar[str] = "fixed-size (without replacement)"

  def wrap(self, event):
    import dp_accounting  # pylint: disable=g-import-not-at-top

    return dp_accounting.SampledWithoutReplacementDpEvent(
      self.dataset_size, int(self.expected_batch_size), event
    )

  def pld_probability(self) -> float:
    raise SamplingError(
      "dp_accounting's PLD does not account sampling without replacement; "
      "use Poisson sampling."
    )


def with_probability(p: float) -> _Sampling:
  """Poisson sampling at probability ``p`` (a dataset of size 1 with an
  expected batch of ``p``), or the full batch at ``p = 1``: the sampling of
  a setting given by its probability alone (the accounting CLI)."""
  p = validation.sampling_probability(p, "sampling_probability")
  return FullBatch() if p >= 1.0 else PoissonSampling(p, 1)


SAMPLINGS = {
  c.name: c for c in (PoissonSampling, FullBatch, WithoutReplacement)
}


def build(name: str, **fields) -> _Sampling:
  if name not in SAMPLINGS:
    raise SamplingError(
      f"sampling must be one of {tuple(SAMPLINGS)}, got {name!r}."
    )
  return SAMPLINGS[name](**fields)


def from_dict(data: dict[str, Any]) -> _Sampling:
  data = dict(data)
  return build(data.pop("name"), **data)
