"""``zoprivacy.private``: an estimator and its plan from a privacy value.

The one road from a target epsilon to an estimator is the value itself::

    privacy = zoprivacy.Privacy(
        sampling=zoprivacy.Poisson(dataset_size=1437, expected_batch_size=64),
        target=zoprivacy.Target(epsilon=2.0, delta=1e-5, num_steps=4000),
    )
    est = zoprivacy.dpzero(privacy, smoothing=1e-3)   # calibrated here
    plan = est.privacy_plan   # plan.epsilon(4000) <= 2.0, delta set

:func:`private` is that call returning ``(estimator, plan)`` as well. The
keyword form of earlier releases (``private(factory, target_epsilon=...,
delta=..., num_steps=..., expected_batch_size=..., dataset_size=...,
clip=...)``) still works, with a ``DeprecationWarning``, through the same
value (whose sampling it assumes, as that road never tied the batches to
the plan).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from zoprivacy.estimators import base, privacy_call
from zoprivacy.privacy import plan as plan_lib
from zoprivacy.privacy import value as value_lib

_LEGACY = ("target_epsilon", "delta", "num_steps")
_SAMPLING = ("expected_batch_size", "dataset_size", "sampling_probability")


def private(
  factory: Callable[..., base.PrivateEstimator],
  privacy: value_lib.Privacy | None = None,
  **hyperparameters,
) -> tuple[base.PrivateEstimator, plan_lib.PrivacyPlan]:
  """``(factory(privacy, **hyperparameters), its plan)``: a value holding a
  target and no multiplier is calibrated on the factory's own plan (the
  smallest multiplier, to 0.2%, with ``plan.epsilon(num_steps) <=
  epsilon``); the plan's ``delta`` is the target's, so
  ``zoprivacy.epsilon(state)`` needs none."""
  if not privacy_call.takes_privacy(factory):
    name = getattr(factory, "__name__", repr(factory))
    raise TypeError(
      f"zoprivacy.private({name}, ...): {name} takes no privacy value, so "
      "there is no noise to calibrate (a non-private baseline, or not a "
      "zoprivacy estimator factory). Pass a private factory such as "
      "zoprivacy.dpzero."
    )
  if privacy is None:
    privacy, hyperparameters = _legacy_value(hyperparameters)
  elif any(k in hyperparameters for k in _LEGACY + _SAMPLING):
    raise TypeError(
      "zoprivacy.private(factory, privacy, ...) reads the target and the "
      "sampling from the value (privacy.replace(target=..., sampling=...))."
    )
  if privacy.noise_multiplier is not None and privacy.target is None:
    raise TypeError(
      "zoprivacy.private calibrates a value for its target; this one has a "
      "noise_multiplier and no target: call the factory directly, "
      "factory(privacy, ...), and read the epsilon spent with "
      "zoprivacy.epsilon(state, delta)."
    )
  estimator = factory(privacy, **hyperparameters)
  return estimator, estimator.privacy_plan


def _legacy_value(hyperparameters):
  """The value earlier releases' keywords describe (deprecated)."""
  missing = [k for k in _LEGACY if k not in hyperparameters]
  if missing:
    raise TypeError(
      "zoprivacy.private(factory, privacy, ...) takes a privacy value with "
      f"a target (zoprivacy.Target(epsilon, delta, num_steps)); got no "
      f"value and no {', '.join(missing)}."
    )
  warnings.warn(
    "zoprivacy.private(factory, target_epsilon=..., delta=..., "
    "num_steps=..., expected_batch_size=..., ...) is deprecated: give the "
    "estimator a zoprivacy.Privacy value with target=zoprivacy.Target("
    "epsilon, delta, num_steps) and sampling=zoprivacy.Poisson(...); it "
    "calibrates itself (docs/library.md).",
    DeprecationWarning,
    stacklevel=3,
  )
  rest = dict(hyperparameters)
  target = value_lib.Target(
    epsilon=rest.pop("target_epsilon"),
    delta=rest.pop("delta"),
    num_steps=rest.pop("num_steps"),
  )
  given = {k: rest.pop(k) for k in _SAMPLING if rest.get(k) is not None}
  for k in _SAMPLING:
    rest.pop(k, None)
  if "noise_multiplier" in rest:
    raise TypeError(
      "zoprivacy.private calibrates noise_multiplier for target_epsilon; "
      "give one of them."
    )
  if given.get("dataset_size") is None or len(given) != 2:
    raise TypeError(
      "zoprivacy.private needs the Poisson sampling as dataset_size and "
      "one of expected_batch_size or sampling_probability (the estimator "
      f"divides by the expected batch size); got {sorted(given) or 'none'}."
    )
  legacy = {
    k: rest.pop(k) for k in list(rest) if k in privacy_call.LEGACY_KEYWORDS
  }
  sampling = value_lib.Poisson(**given)
  privacy = privacy_call.of_keywords(**legacy).replace(
    sampling=sampling, target=target
  )
  return privacy, rest
