"""Calibrate a :class:`~zoprivacy.privacy.PrivacyPlan` for a target epsilon.

The noise multiplier is searched on the plan's own epsilon
(:meth:`PrivacyPlan.epsilon`), the same quantity the ledger and every report
compute, so a calibrated run can never report more than its target:

1. warm start: the noise search of
   :func:`~zoprivacy.accounting.calibration.calibrate_events` on the plan's
   own event factory (:meth:`PrivacyPlan.step_event_at`), with the
   mechanism its value names for calibration
   (``plan.mechanism.calibration_value()``: the continuous Gaussian or
   Laplace, itself or the discrete mechanism's continuous counterpart,
   whose epsilon is within a fraction of a percent), which also starts it;
2. the plan's epsilon is evaluated at the warm start and the multiplier is
   raised by factors of ``1 + rtol`` until it meets the target (the first
   raise that does, found by doubling the raise and bisecting).

The warm start may come from the optional on-disk cache of
:mod:`~zoprivacy.accounting.calibration_cache`; step 2 always runs, so the
cache cannot make a plan miss its target.
"""

from __future__ import annotations

import math

from zoprivacy.accounting import calibration, calibration_cache, relations
from zoprivacy.accounting.dp_warnings import summarize_warnings


def search_noise_multiplier(
  plan,
  *,
  target_epsilon: float,
  delta: float,
  num_steps: int,
  value_discretization_interval: float = 1e-4,
  rtol: float = 2e-3,
) -> calibration.CalibrationResult:
  """The noise search on ``plan``'s own events
  (:func:`~zoprivacy.accounting.calibration.calibrate_events` with the
  plan's event factory, started by its mechanism value)."""
  return calibration.calibrate_events(
    plan.step_event_at,
    plan.mechanism,
    target_epsilon=target_epsilon,
    delta=delta,
    sampling_probability=plan.sampling_probability,
    num_steps=num_steps,
    neighboring=plan.neighboring,
    value_discretization_interval=value_discretization_interval,
    rtol=rtol,
  )


@summarize_warnings
def calibrate_plan(
  plan,
  *,
  target_epsilon: float,
  num_steps: int,
  delta: float | None = None,
  rtol: float = 2e-3,
  max_raises: int = 200,
):
  """``plan`` with the smallest multiplier (to ``rtol``) meeting the target.

  Returns:
    The calibrated plan (with ``delta`` set); ``plan.epsilon(num_steps)`` is
    at most ``target_epsilon``.

  Raises:
    ValueError: for a non-private plan, or no multiplier up to the
      calibrator's range meets the target.
  """
  if not plan.is_noised:
    raise ValueError("A non-private plan has no noise to calibrate.")
  delta = plan.delta if delta is None else delta
  if delta is None:
    raise ValueError("Calibration needs delta.")
  start = plan.replace(mechanism=plan.mechanism.calibration_value())
  search = dict(
    target_epsilon=float(target_epsilon),
    delta=float(delta),
    num_steps=int(num_steps),
    rtol=float(rtol),
  )
  key = dict(
    search,
    sampling_probability=float(plan.sampling_probability),
    mechanism=start.mechanism.name,
    neighboring=relations.name(plan.neighboring),
  )
  sigma = calibration_cache.cached_noise_multiplier(
    "calibrate_noise_multiplier",
    key,
    lambda: search_noise_multiplier(start, **search).noise_multiplier,
  )
  found = _first_raise_meeting(
    plan, sigma, float(delta), target_epsilon, num_steps, rtol, max_raises
  )
  if found is None:
    raise ValueError(
      f"No noise multiplier up to {sigma * (1 + rtol) ** max_raises:.4g} "
      f"meets epsilon {target_epsilon} for {plan.describe()}."
    )
  return found


def _first_raise_meeting(
  plan, sigma, delta, target_epsilon, num_steps, rtol, max_raises
):
  """The plan at the first multiplier of ``sigma``, ``sigma (1 + rtol)``,
  ``sigma (1 + rtol)^2``, ... (``max_raises`` of them) whose own epsilon
  meets the target, or ``None``: the same answer as trying them in turn
  (epsilon falls as the multiplier grows), found in a few evaluations (a
  mechanism accounted in RDP sits 30-40 raises above its PLD start). The
  raise is interpolated from ``log epsilon``, linear in it (secant steps,
  the first at slope -1), inside the bracket of raises known to miss and
  to meet; bisected where interpolation stalls. Every plan returned has
  had its epsilon computed and met."""
  sigmas = [sigma]
  for _ in range(max_raises - 1):
    sigmas.append(sigmas[-1] * (1.0 + rtol))
  last, plans, gaps = len(sigmas) - 1, {}, {}

  def gap(k):  # log(epsilon / target): <= 0 meets
    plans[k] = plan.replace(noise_multiplier=sigmas[k], delta=delta)
    eps = plans[k].epsilon(num_steps)
    met = eps <= target_epsilon
    gaps[k] = (
      min(math.log(eps / target_epsilon), 50.0)
      if not met
      else (math.log(max(eps, 1e-300) / target_epsilon))
    )
    return met

  if gap(0):
    return plans[0]
  lo, hi = 0, None  # lo misses, hi meets
  k = min(max(1, math.ceil(gaps[0] / math.log1p(rtol))), last)
  for tries in range(2 * max_raises):
    if gap(k):
      hi = k
    else:
      lo = k
      if k == last:
        return None
    if hi is not None and hi - lo == 1:
      return plans[hi]
    k = _next_raise(lo, hi, gaps, last, bisect=tries % 3 == 2)
  raise RuntimeError("The raise search did not converge.")  # unreachable


def _next_raise(lo, hi, gaps, last, bisect: bool) -> int:
  """The secant root from the two raises nearest it (with no raise known
  to meet, beyond ``lo``), rounded up and kept strictly inside the bracket
  (so next to an end when the root is); the midpoint every third step,
  where the secant would creep from one side."""
  if hi is None:
    a, b = sorted(gaps)[-2:]  # the two largest raises, both missing
    slope = (gaps[b] - gaps[a]) / (b - a)
    guess = b + (math.ceil(-gaps[b] / slope) if slope < 0 else b)
    return min(max(guess, lo + 1), last)
  if bisect:
    return (lo + hi) // 2
  slope = (gaps[hi] - gaps[lo]) / (hi - lo)
  guess = math.ceil(lo - gaps[lo] / slope) if slope < 0 else lo + 1
  return min(max(guess, lo + 1), hi - 1)
