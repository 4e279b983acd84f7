"""A ledger's epsilon over segments of different plans, within a memory bound.

A ledger whose segments hold different plans composes their privacy loss
distributions, whose supports add up: a segment of little noise (a forced
resume at multiplier 0.1744 after 17.44) makes the composed PLD ask for
gigabytes, and each later start of the run asks again. :func:`compose`
first bounds the memory of the whole composition (:func:`composition_bytes`,
:mod:`~zoprivacy.accounting.pld_size`'s model: at most
:data:`~zoprivacy.accounting.pld_size.MAX_COMPOSITION_BYTES`, 2 GiB), and
composes by the first route that fits, which the result names:

1. the PLD at the plans' discretization (``1e-4``), as every report of one
   plan: dp_accounting's pessimistic PLD, add/remove maximum;
2. every segment an unsampled Gaussian: ``T_i`` steps of ``r_i = Delta /
   sigma_i`` are one Gaussian of ``mu = sqrt(sum T_i r_i^2)``, whose
   privacy profile is exact (Balle & Wang 2018, Thm. 8; tighter than the
   PLD);
3. the same PLD at a coarser discretization (``1e-3``, ``1e-2``, ``1e-1``):
   pessimistic at any discretization, so still an upper bound, looser by
   about ``T`` times the discretization at most;
4. Renyi DP at integer orders (every segment a Gaussian, sampled or not, or
   a discrete Gaussian: :mod:`~zoprivacy.accounting.subsampled_rdp`),
   looser;
5. otherwise the ledger refuses, in one paragraph
   (:class:`~zoprivacy.accounting.pld_size.PLDTooLargeError`).
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import dp_accounting

from zoprivacy.accounting import epsilon as _eps
from zoprivacy.accounting import pld_size, relations, subsampled_rdp

DEFAULT_INTERVAL = 1e-4  # the plans' (plan.VALUE_DISCRETIZATION_INTERVAL)
COARSER = (1e-3, 1e-2, 1e-1)
PROBE = 1e-2  # one-step PMFs probed here: 1/100 of the points of 1e-4
PROBE_MARGIN = 1.25  # its support scaled to a finer grid, with a margin
PLD = "PLD"


class LedgerCompositionWarning(UserWarning):
  """A ledger's epsilon composed by a looser route (memory bound)."""


class Composition(NamedTuple):
  """A ledger's ``epsilon``, the ``method`` that composed it (:data:`PLD`
  or the route's name, for every report) and, for another route, ``why``."""

  epsilon: float
  method: str
  why: str = ""


class _Shape(NamedTuple):
  """One step of a plan: ``ratio`` (``Delta / sigma``, the worst of the
  mechanism and its continuous twin), ``p``, ``whole`` (an unsampled
  Gaussian: dp_accounting builds ``T`` steps as one Gaussian) and
  ``gaussian`` (the step, or its continuous twin, is a Gaussian)."""

  ratio: float
  p: float
  whole: bool
  gaussian: bool = False


def _shape(plan) -> _Shape | None:
  """The step's :class:`_Shape`, or ``None`` for an event it cannot read."""
  sens = 2.0 if plan.neighboring == relations.REPLACE_ONE else 1.0
  event = plan.step_event()
  if event is None:
    event = plan.mechanism.calibration_value().dp_event(plan.sampling)
    event = plan.sampling.wrap(event)
  count = 1
  while isinstance(event, dp_accounting.SelfComposedDpEvent):
    count, event = count * event.count, event.event
  p = 1.0
  if isinstance(event, dp_accounting.PoissonSampledDpEvent):
    p, event = event.sampling_probability, event.event
  if isinstance(event, dp_accounting.GaussianDpEvent):
    ratio = sens * math.sqrt(count) / event.noise_multiplier
    whole = p >= 1.0 and plan.step_event() is not None
    return _Shape(ratio, p, whole, gaussian=True)
  if isinstance(event, dp_accounting.LaplaceDpEvent):
    return _Shape(sens * count / event.noise_multiplier, p, False)
  if isinstance(event, dp_accounting.DiscreteLaplaceDpEvent):
    return _Shape(count * event.parameter * event.sensitivity, p, False)
  return None


def _one_step(plan, interval: float):
  event = plan.step_event()
  if event is None:
    p = plan.sampling.pld_probability()
    return plan.mechanism.pld(p, plan.neighboring, interval)
  return _eps.build_pld(
    event, neighboring=plan.neighboring, value_discretization_interval=interval
  )


def _segment_pld(plan, num_steps: int, interval: float):
  """``num_steps`` steps of ``plan`` at ``interval``: as :meth:`PrivacyPlan.
  pld`, at another discretization."""
  if plan.step_event() is None:
    one = _one_step(plan, interval)
    return one if num_steps == 1 else one.self_compose(num_steps)
  event = dp_accounting.SelfComposedDpEvent(plan.step_event(), num_steps)
  return _eps.build_pld(
    event, neighboring=plan.neighboring, value_discretization_interval=interval
  )


def _segment_cost(plan, num_steps, shape, interval, probe: bool):
  """``(bytes, points)``: the peak memory of building and self-composing
  one segment's PLD at ``interval`` and the points of its larger PMF;
  estimated, or, with ``probe`` and an estimate over 1/64 of the bound,
  from dp_accounting's bounds on its one-step PMF built at :data:`PROBE`
  (a step of unknown shape is always probed)."""
  if shape is not None and shape.whole:
    points = pld_size.gaussian_points(
      shape.ratio * math.sqrt(num_steps), interval
    )
    return pld_size.BUILT_BYTES * points, points
  one, points = math.inf, math.inf
  if shape is not None:
    one, points = pld_size.estimated_points(
      shape.ratio, num_steps, shape.p, interval
    )
  cost = pld_size.BUILT_BYTES * one + pld_size.SELF_BYTES * points
  if probe and not cost <= pld_size.MAX_COMPOSITION_BYTES / 64:
    coarse = max(interval, PROBE)
    scale = coarse / interval * PROBE_MARGIN
    step = _one_step(plan, coarse)
    one = pld_size.self_composed_points(step, 1) * scale
    points = pld_size.self_composed_points(step, num_steps) * scale
    cost = pld_size.BUILT_BYTES * one + pld_size.SELF_BYTES * points
  return cost, points


def composition_bytes(segments, shapes, interval: float) -> float:
  """The peak memory of composing ``segments`` at ``interval``, in bytes:
  the composed PMFs held, plus the largest of each segment's build and
  self-composition and of their running composition
  (:mod:`~zoprivacy.accounting.pld_size`'s model). Estimated first;
  probed where the estimate is over the bound."""
  for probe in (False, True):
    costs = [
      _segment_cost(plan, n, shape, interval, probe)
      for (plan, n), shape in zip(segments, shapes)
    ]
    points = sum(p for _, p in costs)
    transient = max(max(b for b, _ in costs), pld_size.COMPOSE_BYTES * points)
    total = pld_size.HELD_BYTES * points + transient
    if total <= pld_size.MAX_COMPOSITION_BYTES:
      return total
  return total


def _pld_epsilon(segments, delta: float, interval: float) -> float:
  if interval == DEFAULT_INTERVAL:
    plds = [plan.pld(n) for plan, n in segments]
  else:
    plds = [_segment_pld(plan, n, interval) for plan, n in segments]
  pld = plds[0]
  for other in plds[1:]:
    pld = pld.compose(other)
  return float(pld.get_epsilon_for_delta(delta))


def _within(cost: float, segments, delta: float, interval: float):
  """The PLD epsilon at ``interval`` if its ``cost`` is within the bound
  and no segment's own guard refuses it, else ``None``."""
  if not cost <= pld_size.MAX_COMPOSITION_BYTES:
    return None
  try:
    return _pld_epsilon(segments, delta, interval)
  except pld_size.PLDTooLargeError:
    return None


def _rdp_events(segments, shapes):
  """``[(event, num_steps)]`` in RDP, or ``None`` if a segment has none.

  A Gaussian step (or a discrete Gaussian one, whose RDP is at most its
  continuous twin's, Canonne et al. 2020) of ratio ``Delta / sigma`` is the
  add/remove Gaussian of noise multiplier ``1 / ratio`` under its sampling."""
  out = []
  for (plan, n), shape in zip(segments, shapes):
    if shape is None or not shape.gaussian:
      return None
    if plan.neighboring != relations.ADD_OR_REMOVE:
      return None
    out.append((subsampled_rdp.step_event(1.0 / shape.ratio, shape.p), n))
  return out


def compose(segments, delta: float) -> Composition:
  """Epsilon at ``delta`` of ``(plan, num_steps)`` segments (two or more,
  every plan accounted by a PLD), by the first route of the module
  docstring whose memory fits."""
  shapes = [_shape(plan) for plan, _ in segments]
  limit = pld_size.MAX_COMPOSITION_BYTES
  need = composition_bytes(segments, shapes, DEFAULT_INTERVAL)
  eps = _within(need, segments, delta, DEFAULT_INTERVAL)
  if eps is not None:
    return Composition(eps, PLD)
  why = (
    f"the PLD at discretization {DEFAULT_INTERVAL:g} would need about "
    f"{need / 2**30:.3g} GiB, over the bound of {limit / 2**30:.3g} GiB"
  )
  relation = {plan.neighboring for plan, _ in segments}
  if all(s is not None and s.whole for s in shapes) and len(relation) == 1:
    mu = math.sqrt(sum(n * s.ratio**2 for (_, n), s in zip(segments, shapes)))
    eps = _eps.gaussian_profile_epsilon(mu, delta)
    return _named(eps, "exact Gaussian composition", why)
  for interval in COARSER:
    cost = composition_bytes(segments, shapes, interval)
    eps = _within(cost, segments, delta, interval)
    if eps is not None:
      return _named(eps, f"PLD at discretization {interval:g} (looser)", why)
  events = _rdp_events(segments, shapes)
  if events is not None:
    eps = subsampled_rdp.composed_epsilon(events, delta)
    return _named(eps, "Renyi DP (looser)", why)
  raise pld_size.PLDTooLargeError(
    f"The ledger's segments cannot be composed within "
    f"{limit / 2**30:.3g} GiB: {why}, even at discretization "
    f"{COARSER[-1]:g}, and a segment has no Renyi DP bound. Such a run "
    "has had too little noise to account: its epsilon is unbounded here."
  )


def _named(epsilon: float, method: str, why: str) -> Composition:
  warnings.warn(
    f"A ledger's epsilon is composed by {method}: the PLD of its segments "
    f"at discretization {DEFAULT_INTERVAL:g} is over the memory bound "
    f"of {pld_size.MAX_COMPOSITION_BYTES / 2**30:.3g} GiB. Reports name it.",
    LedgerCompositionWarning,
    stacklevel=4,
  )
  return Composition(float(epsilon), method, why)
