"""The privacy loss distribution of a :class:`~zoprivacy.privacy.PrivacyPlan`.

The one place where a plan turns into numbers: continuous mechanisms go
through their ``dp_accounting`` event (:func:`zoprivacy.accounting.build_pld`),
discrete ones through dp_accounting's discrete Gaussian / discrete Laplace
PLD constructors with connect-the-dots discretization
(:mod:`zoprivacy.accounting.discrete_pld`). Results are cached per
``(plan, num_steps)``; PLD objects are never mutated.
"""

from __future__ import annotations

import functools

from zoprivacy.accounting import epsilon as _eps

VALUE_DISCRETIZATION_INTERVAL = 1e-4


@functools.lru_cache(maxsize=16)
def pld(plan, num_steps: int):
  """``num_steps`` composed steps of ``plan`` (pessimistic, float64)."""
  num_steps = int(num_steps)
  if num_steps < 1:
    raise ValueError(f"num_steps must be >= 1, got {num_steps}.")
  p = plan.sampling_probability
  if plan.mechanism.startswith("discrete_"):
    from zoprivacy.accounting import discrete_pld  # pylint: disable=g-import-not-at-top
    build, scale = {
        "discrete_gaussian": (discrete_pld.discrete_gaussian_pld, "sigma"),
        "discrete_laplace": (discrete_pld.discrete_laplace_pld, "scale"),
    }[plan.mechanism]
    return build(**{scale: plan.noise_multiplier * plan.grid_points},
                 sensitivity=plan.grid_points, sampling_probability=p,
                 num_steps=num_steps,
                 value_discretization_interval=VALUE_DISCRETIZATION_INTERVAL)
  import dp_accounting  # pylint: disable=g-import-not-at-top
  event = dp_accounting.SelfComposedDpEvent(plan.step_event(), num_steps)
  return _eps.build_pld(
      event, neighboring=plan.neighboring,
      value_discretization_interval=VALUE_DISCRETIZATION_INTERVAL)
