"""Side-by-side epsilon report: PLD (with the add/remove split), RDP, and,
for Laplace, pure epsilon, for one Poisson-sampled configuration."""

from __future__ import annotations

from typing import NamedTuple

import dp_accounting

from zoprivacy import validation
from zoprivacy.accounting import events as _ev
from zoprivacy.accounting.dp_warnings import summarize_warnings
from zoprivacy.accounting.epsilon import (
  pld_epsilon,
  pld_epsilon_by_direction,
  pure_epsilon_poisson_laplace,
  rdp_epsilon,
)

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
  pld_epsilon: float
  pld_epsilon_remove: float | None
  pld_epsilon_add: float | None
  rdp_epsilon: float | None
  rdp_note: str
  pure_epsilon: float | None
  value_discretization_interval: float

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
      f"PLD epsilon          {fmt(self.pld_epsilon)}   (pessimistic, "
      f"interval {self.value_discretization_interval:g}"
      + (", max of add/remove)" if self.pld_epsilon_add is not None else ")"),
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
    if self.mechanism == "laplace":
      lines.append(
        f"pure epsilon (delta=0) {fmt(self.pure_epsilon)}   "
        "(DP-ZO Thm. 3.1, basic composition)"
      )
    return "\n".join(lines)


@summarize_warnings
def epsilon_report(
  *,
  noise_multiplier: float,
  sampling_probability: float,
  num_steps: int,
  delta: float,
  mechanism: str = "gaussian",
  neighboring: _ev.NeighboringLike = "add_or_remove",
  num_queries: int = 1,
  value_discretization_interval: float = 1e-4,
) -> EpsilonReport:
  """PLD and RDP epsilon side by side (plus pure eps for Laplace).

  Gaussian: ``num_queries`` queries of std ``sqrt(q) sigma C`` per batch are
  accounted as one Gaussian (conventions §5). Laplace: ``noise_multiplier`` is
  the scale over the L1 bound; PLD (eps, delta) and DP-ZO Thm. 3.1 pure eps.
  RDP is reported where dp_accounting supports the event, else ``None`` and
  the reason in ``rdp_note``.
  """
  _ev.check_mechanism(mechanism)
  rel = _ev.neighboring_relation(neighboring)
  q = validation.num_steps(num_queries, name="num_queries")
  delta = validation.delta(delta)
  if mechanism == "gaussian":
    event = poisson_event = _ev.poisson_gaussian_queries_event(
      noise_multiplier=noise_multiplier,
      num_queries=q,
      sampling_probability=sampling_probability,
      num_steps=num_steps,
    )
  else:
    event = poisson_event = _ev.poisson_laplace_event(
      noise_multiplier=noise_multiplier,
      sampling_probability=sampling_probability,
      num_steps=num_steps,
    )
  eps = pld_epsilon(
    event,
    delta=delta,
    neighboring=rel,
    value_discretization_interval=value_discretization_interval,
  )
  remove = add = None
  if rel == NeighborRel.ADD_OR_REMOVE_ONE:
    split = pld_epsilon_by_direction(
      poisson_event,
      delta=delta,
      value_discretization_interval=value_discretization_interval,
    )
    remove, add = split.remove, split.add
  rdp, note = None, ""
  if mechanism == "laplace" and float(sampling_probability) < 1.0:
    note = "dp_accounting's RDP has no Poisson-subsampled Laplace"
  elif rel == NeighborRel.REPLACE_ONE and float(sampling_probability) < 1.0:
    note = "dp_accounting's RDP supports Poisson sampling only under add/remove"
  else:
    rdp = rdp_epsilon(event, delta=delta, neighboring=rel)
    if rel == NeighborRel.REPLACE_ONE:
      note = "replace-one: Gaussian multiplier halved for dp_accounting's RDP"
  pure = None
  if mechanism == "laplace":
    pure = pure_epsilon_poisson_laplace(
      noise_multiplier=noise_multiplier,
      sampling_probability=sampling_probability,
      num_steps=num_steps,
    )
  return EpsilonReport(
    mechanism=mechanism,
    neighboring=_ev.neighboring_name(rel),
    noise_multiplier=float(noise_multiplier),
    sampling_probability=float(sampling_probability),
    num_steps=int(num_steps),
    delta=delta,
    num_queries=q,
    pld_epsilon=eps,
    pld_epsilon_remove=remove,
    pld_epsilon_add=add,
    rdp_epsilon=rdp,
    rdp_note=note,
    pure_epsilon=pure,
    value_discretization_interval=float(value_discretization_interval),
  )
