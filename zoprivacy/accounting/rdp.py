"""Epsilon of DP events from dp_accounting's RDP accountant (Mironov et
al.), with this project's noise-multiplier convention (std over the clip
``C`` under every neighbouring relation).

An upper bound, looser than the PLD epsilon of
:mod:`~zoprivacy.accounting.epsilon`; reports print it beside the PLD, and
the calibration's warm start searches it.
"""

from __future__ import annotations

from collections.abc import Sequence

import dp_accounting

from zoprivacy.accounting import events as _ev
from zoprivacy.accounting.dp_warnings import summarize_warnings
from zoprivacy.core import validation

NeighborRel = dp_accounting.NeighboringRelation


def _rdp_event(event, rel):
  """Rewrites Gaussian noise multipliers for dp_accounting's RDP convention.

  dp_accounting's RDP accountant takes ``noise_multiplier`` as std over the
  sensitivity *of the chosen relation* (``alpha / (2 sigma^2)`` regardless of
  relation, and Wang-Balle-Kasiviswanathan Thm. 27 with a replace-one base
  mechanism). Our ``noise_multiplier`` is std over ``C`` and the replace-one
  sensitivity is ``2C`` (DPZero proof of Thm. 1), so under replace-one every
  Gaussian multiplier is halved. Under add/remove the event is unchanged.
  """
  if rel != NeighborRel.REPLACE_ONE:
    return event
  if isinstance(event, dp_accounting.GaussianDpEvent):
    return dp_accounting.GaussianDpEvent(event.noise_multiplier / 2.0)
  if isinstance(event, dp_accounting.SelfComposedDpEvent):
    return dp_accounting.SelfComposedDpEvent(
      _rdp_event(event.event, rel), event.count
    )
  if isinstance(event, dp_accounting.ComposedDpEvent):
    return dp_accounting.ComposedDpEvent(
      [_rdp_event(e, rel) for e in event.events]
    )
  if isinstance(event, dp_accounting.SampledWithoutReplacementDpEvent):
    return dp_accounting.SampledWithoutReplacementDpEvent(
      event.source_dataset_size,
      event.sample_size,
      _rdp_event(event.event, rel),
    )
  if isinstance(event, dp_accounting.PoissonSampledDpEvent):
    raise ValueError(
      "dp_accounting's RDP accountant supports Poisson sampling only under "
      "add_or_remove; under replace_one use pld_epsilon."
    )
  if isinstance(event, dp_accounting.LaplaceDpEvent):
    raise ValueError(
      "Laplace events are accounted under add_or_remove only (dp_accounting "
      "has no replace-one Laplace PLD)."
    )
  return event


@summarize_warnings
def rdp_epsilon(
  event: dp_accounting.DpEvent,
  *,
  delta: float,
  neighboring: _ev.NeighboringLike = "add_or_remove",
) -> float:
  """Epsilon at ``delta`` from dp_accounting's RDP accountant (default orders).

  Subsampled Gaussian RDP (Mironov, Talwar, Zhang 2019) for Poisson sampling
  under add/remove; Wang-Balle-Kasiviswanathan 2019 Thm. 27 for sampling
  without replacement under replace-one. Replace-one Gaussian multipliers are
  halved first (see ``_rdp_event``). RDP is an upper bound, looser than PLD.

  Raises:
    ValueError: if dp_accounting's RDP accountant cannot account ``event``
      under ``neighboring`` (e.g. Poisson-subsampled Laplace).
  """
  return rdp_epsilon_and_order(event, delta=delta, neighboring=neighboring)[0]


@summarize_warnings
def rdp_epsilon_and_order(
  event: dp_accounting.DpEvent,
  *,
  delta: float,
  neighboring: _ev.NeighboringLike = "add_or_remove",
  orders: Sequence[float] | None = None,
) -> tuple[float, float]:
  """:func:`rdp_epsilon` at the Rényi ``orders`` (dp_accounting's defaults
  if ``None``; any set gives an upper bound, fewer a looser one), and the
  order that attains it."""
  delta = validation.delta(delta)
  rel = _ev.neighboring_relation(neighboring)
  rdp_event = _rdp_event(event, rel)
  accountant = dp_accounting.rdp.RdpAccountant(
    orders=None if orders is None else list(orders), neighboring_relation=rel
  )
  if not accountant.supports(rdp_event):
    raise ValueError(
      f"dp_accounting's RDP accountant cannot account {event!r} under "
      f"{_ev.neighboring_name(rel)} (e.g. Poisson-subsampled Laplace is not "
      "supported; use pld_epsilon / pure_epsilon_poisson_laplace)."
    )
  accountant.compose(rdp_event)
  eps, order = accountant.get_epsilon_and_optimal_order(delta)
  return float(eps), float(order)
