"""The exact vector discrete Gaussian as a plan's mechanism value.

The runtime mechanism is :class:`zoprivacy.secret_noise.vector_discrete_mechanism.
VectorDiscreteGaussian` (an integer lattice with a proven L2 sensitivity,
i.i.d. exact discrete Gaussian noise per coordinate). dp_accounting has no
event or PLD for its Poisson-subsampled form, so the plan's epsilon is the
sampled Gaussian's integer-order RDP bound, whose argument
:mod:`zoprivacy.accounting.subsampled_rdp` states and proves. It is
registered by :mod:`zoprivacy.mechanisms.registry`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

from zoprivacy.accounting import subsampled_rdp
from zoprivacy.mechanisms import values as mech_lib

VECTOR_EXACT_NOTE = (
  "exact vector discrete Gaussian noise on an integer lattice (i.i.d. per "
  "coordinate, Canonne, Kamath & Steinke 2020), accounted by the sampled "
  "Gaussian's integer-order RDP bound (Mironov, Talwar & Zhang 2019)"
)


@dataclasses.dataclass(frozen=True)
class VectorDiscreteGaussian(mech_lib.NoiseMechanism):
  """Exact vector noise, add/remove only, accounted in RDP (no PLD)."""

  name: ClassVar[str] = "vector_discrete_gaussian"
  noise_kind: ClassVar[str] = "discrete_vector"
  relations: ClassVar[tuple] = (mech_lib.ADD_OR_REMOVE,)
  sampler_deviation: float = (
    subsampled_rdp.SAMPLER_DEVIATION
  )  # per step, added to delta

  def calibration_value(self) -> mech_lib.NoiseMechanism:
    """The continuous Gaussian, whose PLD search starts the plan's (its
    RDP bound is a little above)."""
    return mech_lib.Gaussian(self.noise_multiplier, self.num_queries)

  def rdp_event(self, sampling):
    return subsampled_rdp.step_event(
      self.noise_multiplier, sampling.probability
    )

  def pld(self, sampling_probability: float, rel, interval: float):
    raise mech_lib.MechanismError(
      "Exact vector noise has no PLD; its epsilon is an RDP bound "
      "(plan.epsilon)."
    )

  def exact_epsilon(self, sampling, rel, num_steps: int, delta: float):
    """Not a PLD: the RDP bound of :mod:`~zoprivacy.accounting.
    subsampled_rdp` (an upper bound, never below the true epsilon)."""
    del rel  # add/remove only (checked by the plan)
    return subsampled_rdp.composed_epsilon(
      [(self.rdp_event(sampling), num_steps)],
      delta,
      deviation_per_step=self.sampler_deviation,
    )

  def accountant_name(self, sampling) -> str:
    del sampling
    return "RDP accountant (integer orders)"

  def describe(self) -> list[str]:
    return super().describe() + [VECTOR_EXACT_NOTE, self.sampler_note()]

  def sampler_note(self) -> str:
    exponent = math.log2(self.sampler_deviation)
    return (
      "noise drawn on the device in constant time, each step within "
      f"2^{exponent:.0f} of the exact mechanism in total variation, added "
      f"to delta as (1 + e^epsilon) T 2^{exponent:.0f}"
    )


ROUNDED_SUM_NOTE = (
  "clipped sum formed in float32 (ghost clipping) and rounded to the grid "
  "gamma = 2^-k <= C / {grid} in integers: L2 sensitivity at most (C + 2E) "
  "/ gamma + sqrt(d) grid steps, E = gamma_(L+1) B sqrt(T) C the proven "
  "float error of a sum of L terms over B rows (T positions per example, "
  "u = 2^-24), the noise scaled to it (+3.1% of C at d = 4.2M, B = 64)"
)


@dataclasses.dataclass(frozen=True)
class RoundedSumDiscreteGaussian(VectorDiscreteGaussian):
  """Exact vector noise on a rounded float clipped sum (ghost clipping):
  its sensitivity is proven per traced step and the noise scaled to it,
  so the accounting is the lattice's (:class:`VectorDiscreteGaussian`)."""

  name: ClassVar[str] = "rounded_sum_discrete_gaussian"
  sum_grid: int = 2**16

  def describe(self) -> list[str]:
    parts = super().describe()
    return parts[:2] + [ROUNDED_SUM_NOTE.format(grid=self.sum_grid)] + parts[2:]
