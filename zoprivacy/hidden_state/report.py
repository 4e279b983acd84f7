"""The three final-iterate analyses of one run, side by side.

For a :class:`~zoprivacy.hidden_state.NoisyZOGDSetting` after ``T`` steps:

* **composition** (Thm 3.1): every iterate published;
* **output perturbation**: the last step's isotropic noise alone (Fig. 1
  setup; ``strict`` radius by default, see
  :mod:`zoprivacy.hidden_state.baselines`);
* **hidden state** (Thm 3.2, App. A.9): only ``w_T`` released, on the
  event ``G`` whose failure probability is part of delta.

Each as an RDP curve, converted by the standard and the improved
conversion. The hidden-state figure needs declared loss assumptions and
applies only when nothing computed from an intermediate iterate is
published (``docs/hidden_state.md``).
"""

from __future__ import annotations

import dataclasses
import math

from zoprivacy.hidden_state import baselines, theorem32
from zoprivacy.hidden_state import rdp as rdp_lib
from zoprivacy.hidden_state import setting as setting_lib


@dataclasses.dataclass(frozen=True)
class FinalIterateReport:
  """Epsilons (by conversion) of the three analyses at ``(T, delta)``."""

  num_steps: int
  delta: float
  composition: dict
  output_perturbation: dict
  hidden_state: dict
  hidden_state_bound: theorem32.HiddenStateBound

  def to_dict(self) -> dict:
    pt = self.hidden_state_bound.points["improved"]
    return {
      "num_steps": self.num_steps,
      "delta": self.delta,
      "composition_epsilon": dict(self.composition),
      "output_perturbation_epsilon": dict(self.output_perturbation),
      "hidden_state_epsilon": dict(self.hidden_state),
      "hidden_state_analysis": pt.analysis,
      "hidden_state_tau": pt.tau,
      "hidden_state_failure_probability": pt.failure_probability,
      "hidden_state_conversion_delta": pt.conversion_delta,
      "concentration": (
        None if math.isnan(pt.concentration) else pt.concentration
      ),
    }

  def format(self) -> str:
    pt = self.hidden_state_bound.points["improved"]

    def fmt(values):
      return ", ".join(f"{values[c]:.4g} ({c})" for c in rdp_lib.CONVERSIONS)

    lines = [
      f"final-iterate epsilon at delta = {self.delta:g}, T = "
      f"{self.num_steps} (replace-one):",
      f"  hidden state (Thm 3.2): {fmt(self.hidden_state)}",
      f"  composition (Thm 3.1):  {fmt(self.composition)}",
      f"  output perturbation:    {fmt(self.output_perturbation)}",
    ]
    if pt.analysis == "composition":
      lines.append(
        "  (the hidden-state figure is the composition bound: "
        "Thm 3.2 gave no smaller value here)"
      )
    else:
      lines.append(
        f"  hidden-state window T - tau = {self.num_steps - pt.tau}, "
        f"failure term {pt.failure_probability:.3g} + conversion delta "
        f"{pt.conversion_delta:.3g}"
      )
    return "\n".join(lines)


def final_iterate_report(
  setting: setting_lib.NoisyZOGDSetting,
  num_steps: int,
  delta: float,
  *,
  strict_output: bool = True,
) -> FinalIterateReport:
  """The three analyses for the setting's own split (see module doc).

  Raises:
    ValueError: when the loss assumptions are not declared (or violate the
      theorem), or no hidden-state bound fits in ``delta``.
  """
  bound = theorem32.hidden_state_bound(setting, num_steps, delta)
  comp = baselines.composition_rdp(setting, num_steps).epsilons(delta)
  out = baselines.output_perturbation_rdp(
    setting, strict=strict_output
  ).epsilons(delta)
  hidden = {c: bound.epsilon(c) for c in rdp_lib.CONVERSIONS}
  return FinalIterateReport(num_steps, delta, comp, out, hidden, bound)
