"""Calibration: a privacy value for its target, or a mechanism by name.

:func:`calibrate_value` is THE calibration of a
:class:`~zoprivacy.privacy.value.Privacy` value (``Privacy.calibrate``,
and every estimator given an uncalibrated value): the plan the value gives
(the estimator's own, when named) at multiplier 1 is calibrated on its own
epsilon (:func:`~zoprivacy.accounting.calibrate_plan`), and the value
returned holds the multiplier, its target and the plan it was calibrated
on.

:func:`calibrate_noise_multiplier` is the by-name form of the noise search:
it builds the :class:`~zoprivacy.privacy.PrivacyPlan` its arguments describe
(a registered mechanism, :mod:`zoprivacy.mechanisms.registry`; Poisson
sampling at ``sampling_probability``, the full batch at 1) and runs the
search on that plan's event factory
(:func:`~zoprivacy.accounting.plan_calibration.search_noise_multiplier`).
``zoprivacy.accounting.calibrate_noise_multiplier`` is this function.
"""

from __future__ import annotations

from zoprivacy.accounting import calibration, plan_calibration
from zoprivacy.privacy import plan as plan_lib
from zoprivacy.privacy import sampling_scheme


def calibrate_noise_multiplier(
  *,
  target_epsilon: float,
  delta: float,
  sampling_probability: float,
  num_steps: int,
  mechanism: str = "gaussian",
  neighboring="add_or_remove",
  value_discretization_interval: float = 1e-4,
  rtol: float = 2e-3,
) -> calibration.CalibrationResult:
  """Smallest noise multiplier (to ``rtol``) with PLD epsilon ``<= target``.

  Accounts ``num_steps`` Poisson-subsampled steps of ``mechanism``
  (``'gaussian'``: DP-ZO Alg. 1 line 13, App. A eq. (4), Table 16;
  ``'laplace'``: line 15, App. A "Approximate eps-DP by Laplace") with
  dp_accounting's pessimistic PLD, add/remove maximum by default. The
  search is :mod:`~zoprivacy.accounting.calibration`'s; the returned
  ``epsilon`` is the fine pessimistic PLD epsilon of the returned
  multiplier. A mechanism calibrated through another one's search (the
  discrete ones) is calibrated on its plan instead
  (:func:`~zoprivacy.accounting.calibrate_plan`).

  Raises:
    ValueError: on invalid input, or when no multiplier in
      ``[1e-2, 1e6]`` brackets the target (e.g. epsilon so small that even
      ``noise_multiplier = 1e6`` exceeds it).
  """
  plan = plan_lib.PrivacyPlan.build(
    mechanism=mechanism,
    noise_multiplier=1.0,
    neighboring=neighboring,
    sampling=sampling_scheme.with_probability(sampling_probability),
  )
  if not plan.is_noised:
    raise ValueError("A non-private plan has no noise to calibrate.")
  searched = plan.mechanism.calibration_value()
  if type(searched) is not type(plan.mechanism):
    raise ValueError(
      f"The {mechanism} mechanism is calibrated through the "
      f"{searched.name} mechanism's search and its own plan's epsilon: "
      "use zoprivacy.accounting.calibrate_plan(PrivacyPlan.build("
      f"mechanism={mechanism!r}, ...), target_epsilon=..., num_steps=...)."
    )
  return plan_calibration.search_noise_multiplier(
    plan,
    target_epsilon=target_epsilon,
    delta=delta,
    num_steps=num_steps,
    value_discretization_interval=value_discretization_interval,
    rtol=rtol,
  )


def calibrate_value(privacy, target=None, *, estimator=None, **hyperparameters):
  """``privacy`` with the smallest multiplier (to 0.2%) whose plan (of
  ``estimator(privacy, **hyperparameters)``, or the value's own) spends at
  most ``target`` (``privacy.target`` when ``None``), which it keeps."""
  target = privacy.target if target is None else target
  if target is None:
    raise ValueError(
      "Calibration needs a target: privacy.calibrate(zoprivacy.Target("
      "epsilon=2.0, delta=1e-5, num_steps=T or num_epochs=E)), or a value "
      "built with target=."
    )
  template = privacy.replace(noise_multiplier=1.0, target=target)
  target = template.target  # its steps counted on the sampling (epochs)
  plan = template.plan(estimator, **hyperparameters)
  if not plan.is_noised:
    raise ValueError("A non-private plan has no noise to calibrate.")
  calibrated = plan_calibration.calibrate_plan(
    plan,
    target_epsilon=target.epsilon,
    delta=target.delta,
    num_steps=target.num_steps,
  )
  out = template.replace(noise_multiplier=calibrated.noise_multiplier)
  object.__setattr__(out, "calibrated_plan", calibrated)
  return out
