"""Step 1 of the calibration (:mod:`zoprivacy.privacy.calibration`, whose
docstring gives the method): the safeguarded secant search for the noise
multiplier in ``(log sigma, log eps)``, on a plan's fine PLD epsilon
(:func:`search`) or on any epsilon of it (:class:`SecantSearch`). Only
that package calls it."""

from __future__ import annotations

import functools
import math
import time
from typing import NamedTuple

import dp_accounting

from zoprivacy.accounting import epsilon as _eps
from zoprivacy.accounting import pld_size, relations, search_start
from zoprivacy.core import validation


class CalibrationResult(NamedTuple):
  """Result of :func:`search` (and of
  :func:`~zoprivacy.privacy.calibrate_noise_multiplier`).

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


def checked_rtol(rtol: float) -> float:
  """``rtol``, the relative width the search stops at, if in (0, 0.1]."""
  if not 0.0 < rtol <= 0.1:
    raise ValueError(f"rtol must be in (0, 0.1], got {rtol!r}.")
  return rtol


@functools.lru_cache(maxsize=4096)
def _fine_epsilon(event, delta, rel, interval):
  """The fine pessimistic PLD epsilon of ``event`` (what
  :func:`~zoprivacy.accounting.pld_epsilon` reports), cached on the event
  and the Python scalars."""
  return _eps.pld_epsilon(
    event, delta=delta, neighboring=rel, value_discretization_interval=interval
  )


def search(
  plan,
  *,
  target_epsilon: float,
  delta: float,
  num_steps: int,
  value_discretization_interval: float = 1e-4,
  rtol: float = 2e-3,
) -> CalibrationResult:
  """Step 1 on ``plan``'s own event factory, started by its mechanism
  value (``warm_start``, ``first_point``); the result's ``epsilon`` is the
  fine pessimistic PLD epsilon of its multiplier (max of add and remove)."""
  t0 = time.perf_counter()
  target = search_start.SearchTarget(
    validation.epsilon(target_epsilon, "target_epsilon"),
    validation.delta(delta),
    validation.sampling_probability(plan.sampling_probability),
    validation.num_steps(num_steps),
    relations.relation(plan.neighboring),
  )
  interval = validation.discretization_interval(value_discretization_interval)
  mechanism, steps = plan.mechanism, target.num_steps
  mechanism.check_relation(target.neighboring)
  # A feasible starting multiplier and d log eps / d log sigma there (the
  # first secant step's slope).
  warm, slope = mechanism.warm_start(target)
  search = SecantSearch(
    lambda sigma: _fine_epsilon(
      dp_accounting.SelfComposedDpEvent(plan.step_event_at(sigma), steps),
      target.delta,
      target.neighboring,
      interval,
    ),
    target=target.target_epsilon,
    width=math.log1p(checked_rtol(rtol)),
    slope=slope,
    context=f"at delta={target.delta} (p={target.sampling_probability}, "
    f"T={steps}, {mechanism.name})",
  )
  warm = min(
    max(warm, search_start.MIN_NOISE_MULTIPLIER),
    search_start.MAX_NOISE_MULTIPLIER,
  )
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


class SecantSearch:
  """The safeguarded secant search in ``x = log sigma``: points are
  ``(x, g, eps)`` with ``g = log eps - log target``; ``lo`` has ``eps >
  target`` and ``hi`` ``eps <= target``. Once the secant estimate is
  accurate it places one point just above and one just below the root;
  bisection where the secant leaves the bracket."""

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
    if self.hi is None and x >= search_start.X_MAX - 1e-12:
      raise ValueError(
        f"Target epsilon {self.target} is unreachable: even noise_multiplier="
        f"{search_start.MAX_NOISE_MULTIPLIER:g} gives epsilon {e:.6g} "
        f"{self.context}."
      )
    if self.lo is None and x <= search_start.X_MIN + 1e-12:
      raise ValueError(
        f"Target epsilon {self.target} is met by every noise_multiplier >= "
        f"{search_start.MIN_NOISE_MULTIPLIER:g} (epsilon {e:.6g} there); "
        "nothing to calibrate in the supported range."
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
    x_new = min(
      max(x_new, x - search_start.MAX_STEP), x + search_start.MAX_STEP
    )
    x_new = min(max(x_new, search_start.X_MIN), search_start.X_MAX)
    if any(abs(x_new - pt[0]) < 1e-12 for pt in self.points):
      x_new = 0.5 * (lo[0] + hi[0]) if (lo and hi) else x_new + offset
    return x_new
