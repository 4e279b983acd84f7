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
import math

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

    m, q = plan.grid_points, plan.num_queries
    if plan.mechanism == "discrete_gaussian":
      # q queries on one batch: one discrete Gaussian of parameter s sqrt(q)
      # (s each query's), sensitivity q m (DiscreteMechanism); the float
      # product is nudged down, so the accounted noise is never larger.
      sigma = plan.integer_noise_scale
      if q > 1:
        sigma = sigma * math.sqrt(q) * (1 - 1e-12)
      kwargs = {"sigma": sigma}
    elif q > 1:
      from zoprivacy.accounting import discrete_laplace_queries as dlq  # pylint: disable=g-import-not-at-top

      return dlq.discrete_laplace_queries_pld(
        scale=plan.integer_noise_scale,
        sensitivity=m,
        num_queries=q,
        sampling_probability=p,
        num_steps=num_steps,
        value_discretization_interval=VALUE_DISCRETIZATION_INTERVAL,
      )
    else:
      kwargs = {"scale": plan.integer_noise_scale}
    return discrete_pld.discrete_noise_pld(
      **kwargs,
      sensitivity=q * m,
      sampling_probability=p,
      num_steps=num_steps,
      value_discretization_interval=VALUE_DISCRETIZATION_INTERVAL,
      neighboring=plan.neighboring,
    )
  import dp_accounting  # pylint: disable=g-import-not-at-top

  event = dp_accounting.SelfComposedDpEvent(plan.step_event(), num_steps)
  return _eps.build_pld(
    event,
    neighboring=plan.neighboring,
    value_discretization_interval=VALUE_DISCRETIZATION_INTERVAL,
  )


def full_batch_gaussian_epsilon(plan, num_steps: int, delta: float) -> float:
  """Exact epsilon of ``T`` un-subsampled Gaussian steps (no discretization).

  ``T`` Gaussian releases with noise multiplier ``sigma`` are one Gaussian
  mechanism with ``mu = Delta sqrt(T) / sigma`` (``Delta`` = 1 add/remove,
  2 replace-one), whose privacy profile is exact (Balle & Wang 2018,
  Thm. 8): ``delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)``.
  Solved for ``eps`` in float64; a PLD would need ``O(mu / interval)``
  points, which is prohibitive for the large ``mu`` of full-batch runs.
  """
  import math  # pylint: disable=g-import-not-at-top

  from scipy import optimize, stats  # pylint: disable=g-import-not-at-top

  sens = 2.0 if plan.neighboring == "replace_one" else 1.0
  mu = sens * math.sqrt(num_steps) / plan.noise_multiplier

  def excess(eps):
    a = stats.norm.cdf(mu / 2 - eps / mu)
    b = math.exp(eps + stats.norm.logcdf(-mu / 2 - eps / mu))
    return a - b - delta

  if excess(0.0) <= 0:
    return 0.0
  hi = mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / delta)) + 1.0
  while excess(hi) > 0:
    hi *= 2
  return float(optimize.brentq(excess, 0.0, hi, xtol=1e-12, rtol=1e-12))
