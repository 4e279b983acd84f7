"""Fast, safe calibration of the noise multiplier for a target (eps, delta).

Method (every epsilon below is computed by dp_accounting):

The search runs on a plan's event factory (the multiplier to one step's
``DpEvent``) and is started by the mechanism value's own methods
(:mod:`zoprivacy.mechanisms.values`); no mechanism is named here.

1. Warm start. Gaussian: the multiplier that meets the target under the RDP
   accountant at the few orders of
   :data:`~zoprivacy.accounting.search_start.WARM_START_ORDERS` (an upper
   bound on epsilon at any set of orders, so this multiplier is feasible and
   close: about a dozen RDP evaluations in log space, 3 ms each). Laplace:
   the closed-form pure-eps multiplier of DP-ZO Thm. 3.1 (also feasible).
   For the Gaussian under add/remove the search's first point is the
   central-limit (GDP) estimate where it lies below the warm start
   (:mod:`~zoprivacy.accounting.search_start`: an approximation that moves
   where the search looks, never what it returns); a first point too small
   to account falls back to the warm start.
2. Safeguarded secant search in ``(log sigma, log eps)`` on the *fine*
   (``value_discretization_interval``, default ``1e-4``) pessimistic PLD
   epsilon, the same quantity :func:`pld_epsilon` reports. It keeps a
   bracket ``[lo, hi]`` of evaluated multipliers with ``eps(lo) > target >=
   eps(hi)`` and stops when ``hi / lo <= 1 + rtol``. The first secant step
   takes the RDP curve's log-log slope at the warm start (Gaussian; -1 for
   Laplace), later ones the slope between the two evaluated points nearest
   the root. A multiplier too small to account (its PLD would not fit in
   memory) raises unless a feasible multiplier is known; then it counts as
   infinite epsilon and the search moves up from it (it raises if the
   final bracket's lower end is such a multiplier).
   Once the secant estimate is accurate it places one point just
   above and one just below the root, so it usually needs 2-4 fine
   evaluations in all.
3. Returns ``hi``: its epsilon is the fine pessimistic PLD epsilon (never a
   coarse or optimistic value) and is ``<= target``; the bracket certifies
   that the exact calibrated multiplier (the root of the same fine PLD
   epsilon, e.g. what ``dp_accounting.mechanism_calibration`` finds) is within
   ``rtol`` below it (assuming epsilon decreases with the multiplier).

Fine evaluations are cached, so repeated calibrations are cheap.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import NamedTuple

import dp_accounting

from zoprivacy.accounting import epsilon as _eps
from zoprivacy.accounting import pld_size, relations
from zoprivacy.accounting.dp_warnings import summarize_warnings
from zoprivacy.accounting.search_start import (
  _MAX_STEP,
  _X_MAX,
  _X_MIN,
  MAX_NOISE_MULTIPLIER,
  MIN_NOISE_MULTIPLIER,
)
from zoprivacy.core import validation


class CalibrationResult(NamedTuple):
  """Result of :func:`calibrate_events` (and of
  :func:`~zoprivacy.accounting.calibrate_noise_multiplier`).

  Attributes:
    noise_multiplier: the calibrated multiplier (std or Laplace scale over C).
    epsilon: fine pessimistic PLD epsilon of ``noise_multiplier`` at
      ``delta`` (``<= target_epsilon``).
    target_epsilon, delta: the request.
    lower_bound: an evaluated multiplier whose epsilon exceeds the target;
      the exact calibrated multiplier lies in ``(lower_bound,
      noise_multiplier]``.
    num_pld_evaluations: fine PLD evaluations made (cache hits included).
    seconds: wall time.
    mechanism, neighboring, sampling_probability, num_steps,
    value_discretization_interval: the configuration (the mechanism's and
      the relation's names).
  """

  noise_multiplier: float
  epsilon: float
  target_epsilon: float
  delta: float
  lower_bound: float
  num_pld_evaluations: int
  seconds: float
  mechanism: str
  neighboring: str
  sampling_probability: float
  num_steps: int
  value_discretization_interval: float


class SearchTarget(NamedTuple):
  """What a search meets: ``target_epsilon`` at ``delta`` after
  ``num_steps`` steps at ``sampling_probability`` under ``neighboring``
  (the argument of a mechanism value's ``warm_start`` and ``first_point``)."""

  target_epsilon: float
  delta: float
  sampling_probability: float
  num_steps: int
  neighboring: relations.Relation

  def search_args(self) -> tuple:
    """``(target, delta, p, steps, relation name)``, the arguments of
    :mod:`~zoprivacy.accounting.search_start`'s functions."""
    return (*self[:4], relations.name(self.neighboring))


@functools.lru_cache(maxsize=4096)
def _fine_epsilon(event, delta, rel, interval):
  """The fine pessimistic PLD epsilon of ``event`` (what :func:`pld_epsilon`
  reports), cached on the event and the Python scalars."""
  return _eps.pld_epsilon(
    event, delta=delta, neighboring=rel, value_discretization_interval=interval
  )


@summarize_warnings
def calibrate_events(
  step_event: Callable[[float], dp_accounting.DpEvent],
  mechanism,
  *,
  target_epsilon: float,
  delta: float,
  sampling_probability: float,
  num_steps: int,
  neighboring: relations.NeighboringLike = relations.ADD_OR_REMOVE,
  value_discretization_interval: float = 1e-4,
  rtol: float = 2e-3,
) -> CalibrationResult:
  """Smallest noise multiplier (to ``rtol``) whose ``num_steps`` steps have
  PLD epsilon ``<= target_epsilon``.

  ``step_event`` is a plan's event factory: the multiplier to one step's
  ``DpEvent`` (its sampling included; :meth:`PrivacyPlan.step_event_at
  <zoprivacy.privacy.PrivacyPlan.step_event_at>`). ``mechanism`` is the
  mechanism value it releases (:mod:`zoprivacy.mechanisms.values`): its
  relations, its ``warm_start`` and its ``first_point`` start the search
  (the module docstring); the returned ``epsilon`` is the fine pessimistic
  PLD epsilon of the returned multiplier (max of add and remove).

  Raises:
    ValueError: on invalid input, or when no multiplier in
      ``[1e-2, 1e6]`` brackets the target (e.g. epsilon so small that even
      ``noise_multiplier = 1e6`` exceeds it).
  """
  t0 = time.perf_counter()
  target = SearchTarget(
    validation.epsilon(target_epsilon, "target_epsilon"),
    validation.delta(delta),
    validation.sampling_probability(sampling_probability),
    validation.num_steps(num_steps),
    relations.relation(neighboring),
  )
  interval = validation.discretization_interval(value_discretization_interval)
  if not 0.0 < rtol <= 0.1:
    raise ValueError(f"rtol must be in (0, 0.1], got {rtol!r}.")
  mechanism.check_relation(target.neighboring)
  # A feasible starting multiplier and d log eps / d log sigma there (the
  # first secant step's slope).
  warm, slope = mechanism.warm_start(target)
  steps = target.num_steps
  search = _SecantSearch(
    lambda sigma: _fine_epsilon(
      dp_accounting.SelfComposedDpEvent(step_event(sigma), steps),
      target.delta,
      target.neighboring,
      interval,
    ),
    target=target.target_epsilon,
    width=math.log1p(rtol),
    slope=slope,
    context=f"at delta={target.delta} (p={target.sampling_probability}, "
    f"T={steps}, {mechanism.name})",
  )
  warm = min(max(warm, MIN_NOISE_MULTIPLIER), MAX_NOISE_MULTIPLIER)
  lo, hi = search.run(mechanism.first_point(target, warm), feasible=warm)
  return CalibrationResult(
    noise_multiplier=float(math.exp(hi[0])),
    epsilon=float(hi[2]),
    target_epsilon=target.target_epsilon,
    delta=target.delta,
    lower_bound=float(math.exp(lo[0])),
    num_pld_evaluations=search.evaluations,
    seconds=time.perf_counter() - t0,
    mechanism=mechanism.name,
    neighboring=relations.name(target.neighboring),
    sampling_probability=target.sampling_probability,
    num_steps=steps,
    value_discretization_interval=interval,
  )


class _SecantSearch:
  """The safeguarded secant search of the module docstring, in ``x = log
  sigma``: points are ``(x, g, eps)`` with ``g = log eps - log target``;
  ``lo`` has ``eps > target`` and ``hi`` ``eps <= target``."""

  def __init__(self, fine, *, target, width, slope, context):
    self.fine, self.target, self.width = fine, target, width
    self.slope, self.context = slope, context
    self.log_target = math.log(target)
    self.points, self.lo, self.hi = [], None, None
    self.refused = {}  # x -> the memory guard's error there
    self.evaluations = 0

  def run(self, start: float, *, feasible: float):
    """``(lo, hi)``: the final bracket, ``hi / lo <= 1 + rtol``. The
    search starts at ``start``, or at the ``feasible`` warm start where
    ``start``'s PLD is too large to account."""
    x = math.log(start)
    for _ in range(80):
      try:
        e = self.evaluate(x)
      except pld_size.PLDTooLargeError:
        if start == feasible:
          raise
        x = math.log(start := feasible)
        continue
      if self.lo is not None and self.hi is not None:
        if self.hi[0] - self.lo[0] <= self.width:
          break
      self.check_reachable(x, e)
      x = self.next_x(x)
    else:  # pragma: no cover - the bracket shrinks geometrically
      raise RuntimeError("Noise calibration did not converge.")
    if self.lo[0] in self.refused:  # the root may lie below what is accounted
      raise self.refused[self.lo[0]]
    return self.lo, self.hi

  def evaluate(self, x: float) -> float:
    """Evaluates the fine epsilon at ``x`` and updates the bracket."""
    self.evaluations += 1
    try:
      e = self.fine(math.exp(x))
    except pld_size.PLDTooLargeError as err:
      # So little noise that its PLD would not fit in memory. Before a
      # feasible point is known (the warm start is feasible by RDP or pure
      # DP, so the root is below it) the target cannot be accounted: raise.
      # After one, the search overshot below the root: on the too-little-
      # noise side, as infinite epsilon.
      if self.hi is None:
        raise
      self.refused[x] = err
      e = math.inf
    if e == 0.0:
      g = -50.0
    elif math.isinf(e):
      g = 50.0
    else:
      g = math.log(e) - self.log_target
    self.points.append((x, g, e))
    if not e <= self.target:  # classified on epsilon itself, not its log
      if self.lo is None or x > self.lo[0]:
        self.lo = (x, g, e)
    elif self.hi is None or x < self.hi[0]:
      self.hi = (x, g, e)
    return e

  def check_reachable(self, x: float, e: float) -> None:
    if self.hi is None and x >= _X_MAX - 1e-12:
      raise ValueError(
        f"Target epsilon {self.target} is unreachable: even noise_multiplier="
        f"{MAX_NOISE_MULTIPLIER:g} gives epsilon {e:.6g} {self.context}."
      )
    if self.lo is None and x <= _X_MIN + 1e-12:
      raise ValueError(
        f"Target epsilon {self.target} is met by every noise_multiplier >= "
        f"{MIN_NOISE_MULTIPLIER:g} (epsilon {e:.6g} there); nothing to "
        "calibrate in the supported range."
      )

  def secant_estimate(self) -> float:
    """The root from the two finite points closest to it (the slope kept
    from before where theirs is not negative), inside the bracket."""
    finite = sorted(
      (pt for pt in self.points if abs(pt[1]) < 50.0),
      key=lambda pt: abs(pt[1]),
    )
    if len(finite) >= 2 and abs(finite[0][0] - finite[1][0]) > 1e-12:
      s = (finite[0][1] - finite[1][1]) / (finite[0][0] - finite[1][0])
      if s < 0:
        self.slope = s
    best = finite[0] if finite else self.points[-1]
    x_hat = best[0] - best[1] / self.slope
    if self.lo is not None and self.hi is not None:
      # Strictly inside the bracket; bisection if the secant is not useful.
      if not self.lo[0] < x_hat < self.hi[0]:
        x_hat = 0.5 * (self.lo[0] + self.hi[0])
    return x_hat

  def next_x(self, x: float) -> float:
    """A point just above (or below) the secant root, kept off the
    bracket's ends, at most a factor 4 from ``x`` and in range."""
    lo, hi, width = self.lo, self.hi, self.width
    x_hat = self.secant_estimate()
    need_hi = hi is None or hi[0] - x_hat > 0.9 * width
    offset = 0.4 * width if need_hi else -0.4 * width
    # Just above the estimate while no feasible point is that close; then
    # as far below it as still closes the bracket (the likeliest point to
    # be under the root that ends the search).
    x_new = x_hat + offset if need_hi else hi[0] - 0.95 * width
    if lo is not None and hi is not None:
      margin = min(0.05 * (hi[0] - lo[0]), 0.4 * width)
      x_new = min(max(x_new, lo[0] + margin), hi[0] - margin)
    x_new = min(max(x_new, x - _MAX_STEP), x + _MAX_STEP)
    x_new = min(max(x_new, _X_MIN), _X_MAX)
    if any(abs(x_new - pt[0]) < 1e-12 for pt in self.points):
      x_new = 0.5 * (lo[0] + hi[0]) if (lo and hi) else x_new + offset
    return x_new
