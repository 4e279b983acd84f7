"""Calibrate a :class:`~zoprivacy.privacy.PrivacyPlan` for a target epsilon.

The noise multiplier is searched on the plan's own epsilon
(:meth:`PrivacyPlan.epsilon`), the same quantity the ledger and every report
compute, so a calibrated run can never report more than its target:

1. warm start: :func:`~zoprivacy.accounting.calibrate_noise_multiplier` for
   the continuous mechanism with the plan's neighbouring relation (the
   discrete mechanisms start from their continuous counterpart, whose
   epsilon is within a fraction of a percent);
2. the plan's epsilon is evaluated at the warm start and the multiplier is
   raised by factors of ``1 + rtol`` until it meets the target.

The warm start may come from the optional on-disk cache of
:mod:`~zoprivacy.accounting.calibration_cache`; step 2 always runs, so the
cache cannot make a plan miss its target.
"""

from __future__ import annotations

from zoprivacy.accounting import calibration, calibration_cache
from zoprivacy.accounting import events as _ev
from zoprivacy.accounting.dp_warnings import summarize_warnings


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
  search = dict(
    target_epsilon=float(target_epsilon),
    delta=float(delta),
    sampling_probability=float(plan.sampling_probability),
    num_steps=int(num_steps),
    mechanism=plan.mechanism.calibration_family,
    neighboring=_ev.neighboring_name(plan.neighboring),
    rtol=float(rtol),
  )
  sigma = calibration_cache.cached_noise_multiplier(
    "calibrate_noise_multiplier",
    search,
    lambda: calibration.calibrate_noise_multiplier(**search).noise_multiplier,
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
