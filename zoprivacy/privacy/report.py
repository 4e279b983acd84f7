"""Side-by-side epsilon report of a privacy plan: the plan's own epsilon
(what a run reports), PLD (with the add/remove split), RDP, and the pure
epsilon where the mechanism has one."""

from __future__ import annotations

from typing import NamedTuple

import dp_accounting

from zoprivacy.accounting import events as _ev
from zoprivacy.accounting.dp_warnings import summarize_warnings
from zoprivacy.accounting.epsilon import (
  epsilon_by_direction,
  pld_epsilon,
  pld_epsilon_by_direction,
  pld_epsilon_for_delta,
)
from zoprivacy.accounting.rdp import rdp_epsilon
from zoprivacy.core import validation
from zoprivacy.privacy import plan as plan_lib

NeighborRel = dp_accounting.NeighboringRelation


# -------------------------------------------------------------------- report


class EpsilonReport(NamedTuple):
  """PLD and RDP (and for Laplace the pure eps) of one training configuration."""

  mechanism: str
  neighboring: str
  noise_multiplier: float
  sampling_probability: float
  num_steps: int
  delta: float
  num_queries: int
  pld_epsilon: float | None
  pld_epsilon_remove: float | None
  pld_epsilon_add: float | None
  rdp_epsilon: float | None
  rdp_note: str
  pure_epsilon: float | None
  value_discretization_interval: float
  plan_epsilon: float | None = None
  accountant: str = ""

  def format(self) -> str:
    def fmt(x):
      return "n/a" if x is None else f"{x:.6g}"

    lines = [
      f"mechanism            {self.mechanism} (num_queries={self.num_queries})",
      f"neighboring          {self.neighboring}",
      f"noise_multiplier     {self.noise_multiplier:.6g}",
      f"sampling_probability {self.sampling_probability:.6g}",
      f"num_steps            {self.num_steps}",
      f"delta                {self.delta:.3g}",
      f"epsilon              {fmt(self.plan_epsilon)}   (the plan's: "
      f"{self.accountant}, as a run reports it)",
      f"PLD epsilon          {fmt(self.pld_epsilon)}   "
      + (
        "(the lattice's noise has no PLD)"
        if self.pld_epsilon is None
        else f"(pessimistic, interval {self.value_discretization_interval:g}"
        + (", max of add/remove)" if self.pld_epsilon_add is not None else ")")
      ),
    ]
    if self.pld_epsilon_add is not None:
      lines.append(
        f"  remove / add       {fmt(self.pld_epsilon_remove)} / "
        f"{fmt(self.pld_epsilon_add)}"
      )
    lines.append(
      f"RDP epsilon          {fmt(self.rdp_epsilon)}"
      + (f"   ({self.rdp_note})" if self.rdp_note else "")
    )
    if self.pure_epsilon is not None:
      lines.append(
        f"pure epsilon (delta=0) {fmt(self.pure_epsilon)}   "
        "(DP-ZO Thm. 3.1, basic composition)"
      )
    return "\n".join(lines)


@summarize_warnings
def epsilon_report(
  plan: plan_lib.PrivacyPlan,
  *,
  num_steps: int,
  delta: float | None = None,
  value_discretization_interval: float = 1e-4,
) -> EpsilonReport:
  """PLD and RDP epsilon of ``num_steps`` steps of ``plan`` side by side
  (plus the pure epsilon where the mechanism has one).

  ``plan``'s step event (Gaussian ``q`` queries are one Gaussian,
  conventions §5) is composed by dp_accounting's PLD accountant at
  ``value_discretization_interval``; without an event (discrete noise) the
  plan's own PLD is read. RDP is reported where dp_accounting supports the
  event, else ``None`` and the reason in ``rdp_note``.
  """
  delta = validation.delta(plan.delta if delta is None else delta)
  steps = validation.num_steps(num_steps)
  interval = validation.discretization_interval(value_discretization_interval)
  rel = _ev.neighboring_relation(plan.neighboring)
  step = plan.step_event()
  remove = add = rdp = eps = None
  own = plan.mechanism.rdp_event(plan.sampling)
  if step is None and own is not None:  # a lattice: no PLD, its RDP bound
    rdp = plan.epsilon(steps, delta)
    note = "the plan's bound: sampled Gaussian, integer orders"
  elif step is None:
    pld = plan.pld(steps)
    eps = pld_epsilon_for_delta(pld, delta)
    if rel == NeighborRel.ADD_OR_REMOVE_ONE:
      remove, add = epsilon_by_direction(pld, delta)
    note = "no dp_accounting event for this mechanism: PLD only"
  else:
    event = dp_accounting.SelfComposedDpEvent(step, steps)
    kw = dict(delta=delta, value_discretization_interval=interval)
    eps = pld_epsilon(event, neighboring=rel, **kw)
    if rel == NeighborRel.ADD_OR_REMOVE_ONE:
      remove, add = pld_epsilon_by_direction(event, **kw)
    rdp, note = _rdp(event, delta, rel)
  p = plan.sampling_probability
  return EpsilonReport(
    mechanism=plan.mechanism.name,
    neighboring=_ev.neighboring_name(rel),
    noise_multiplier=float(plan.noise_multiplier),
    sampling_probability=float(p),
    num_steps=steps,
    delta=delta,
    num_queries=int(plan.num_queries),
    pld_epsilon=eps,
    pld_epsilon_remove=remove,
    pld_epsilon_add=add,
    rdp_epsilon=rdp,
    rdp_note=note,
    pure_epsilon=plan.mechanism.pure_epsilon(p, steps),
    value_discretization_interval=interval,
    plan_epsilon=plan.epsilon(steps, delta),
    accountant=plan.mechanism.accountant_name(plan.sampling),
  )


def _rdp(event, delta, rel) -> tuple[float | None, str]:
  """dp_accounting's RDP epsilon, or ``None`` and why not."""
  try:
    rdp = rdp_epsilon(event, delta=delta, neighboring=rel)
  except ValueError as err:
    return None, str(err)
  if rel == NeighborRel.REPLACE_ONE:
    return (
      rdp,
      "replace-one: Gaussian multiplier halved for dp_accounting's RDP",
    )
  return rdp, ""
