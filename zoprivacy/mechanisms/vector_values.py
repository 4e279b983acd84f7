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
      [(self.rdp_event(sampling), num_steps)], delta
    )

  def accountant_name(self, sampling) -> str:
    del sampling
    return "RDP accountant (integer orders)"

  def describe(self) -> list[str]:
    return super().describe() + [VECTOR_EXACT_NOTE]
