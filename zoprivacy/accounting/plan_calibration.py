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
   raised by factors of ``1 + rtol`` until it meets the target.

The warm start may come from the optional on-disk cache of
:mod:`~zoprivacy.accounting.calibration_cache`; step 2 always runs, so the
cache cannot make a plan miss its target.
"""

from __future__ import annotations

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
  for _ in range(max_raises):
    candidate = plan.replace(noise_multiplier=sigma, delta=float(delta))
    if candidate.epsilon(num_steps) <= target_epsilon:
      return candidate
    sigma *= 1.0 + rtol
  raise ValueError(
    f"No noise multiplier up to {sigma:.4g} meets epsilon "
    f"{target_epsilon} for {plan.describe()}."
  )
