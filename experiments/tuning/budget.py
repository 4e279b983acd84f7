"""What a repeat-and-select tuning spends, and the per-trial noise that fits.

Papernot and Steinke (2022, arXiv 2110.03620): run a private mechanism a
random number ``K`` of times, ``K`` drawn from a Poisson, or a truncated
negative binomial (geometric, logarithmic), and release only the best run.
Thm. 2 (negative binomial) and Thm. 6 (Poisson) bound the Renyi DP of the
whole from one run's, at any orders where one run's RDP is bounded;
dp_accounting's RDP accountant implements both as
``RepeatAndSelectDpEvent(trial_event, mean, shape)``.

One trial here is a whole private training run (``num_steps`` Poisson
subsampled steps) followed by its selection score: the count of correct
predictions on a private validation split plus exact discrete Gaussian
noise (sensitivity one under add/remove). Every RDP is evaluated at the
integer orders of :data:`zoprivacy.accounting.subsampled_rdp.ORDERS` only
(dp_accounting's default orders include fractional ones):

* a step with exact noise (the scalar discrete Gaussian on a quantized sum,
  or the vector discrete Gaussian on an integer lattice): at integer orders
  the Poisson-subsampled (multivariate) discrete Gaussian's Renyi
  divergences, both directions, are at most the sampled Gaussian's of the
  same multiplier (:mod:`zoprivacy.accounting.subsampled_rdp` proves it), so
  :func:`step_rdp_event` gives ``PoissonSampledDpEvent(p,
  GaussianDpEvent(sigma))``. The scalar mechanism's ``q`` integer sums move
  by a vector in ``[-m, m]^q`` (L2 at most ``m sqrt(q)``) under noise of
  parameter ``sigma m sqrt(q)`` each, the vector case of that argument;
* a step with floating-point noise (the weaker opt-in): the same event,
  the continuous sampled Gaussian's RDP;
* the score: ``GaussianDpEvent(score_noise)``. It is one unsubsampled
  discrete Gaussian of sensitivity one, whose Renyi divergence of order
  ``a`` is at most ``a / (2 score_noise^2)`` (Canonne, Kamath and Steinke
  2020, Prop. 5), the Gaussian's.

Only the steps are subsampled; the single-release bound is used for the
score alone.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import dp_accounting

from zoprivacy import accounting
from zoprivacy.accounting import dp_accounting_adapter, subsampled_rdp
from zoprivacy.mechanisms import values as mech_values
from zoprivacy.mechanisms import vector_values
from zoprivacy.privacy import calibration, randomness
from zoprivacy.privacy.value import Target

# name -> dp_accounting's shape of the trial-count distribution.
DISTRIBUTIONS = {
  "poisson": math.inf,
  "geometric": 1.0,
  "logarithmic": 0.0,
  "negative_binomial": None,  # shape given separately, 0 < shape < inf
}


class TrialCount(NamedTuple):
  """The distribution of the secret number of trials."""

  distribution: str
  mean: float
  shape: float

  def describe(self) -> str:
    if self.distribution == "negative_binomial":
      return (
        f"truncated negative binomial, mean {self.mean:g}, shape {self.shape:g}"
      )
    return f"{self.distribution}, mean {self.mean:g}"


def trial_count(
  distribution: str, mean: float, shape: float | None = None
) -> TrialCount:
  """Checks a trial-count distribution; refuses a mean under one trial."""
  if distribution not in DISTRIBUTIONS:
    raise ValueError(
      f"distribution must be one of {sorted(DISTRIBUTIONS)}, got "
      f"{distribution!r}."
    )
  if not (math.isfinite(mean) and mean >= 1.0):
    raise ValueError(
      f"The mean number of trials must be at least 1, got {mean!r}: "
      "repeat-and-select (Papernot and Steinke 2022) needs mean >= 1, and "
      "a mean of zero trials would train nothing."
    )
  fixed = DISTRIBUTIONS[distribution]
  if fixed is None:
    if shape is None or not 0.0 < shape < math.inf:
      raise ValueError(
        "negative_binomial needs a shape in (0, inf); use poisson, "
        "geometric (shape 1) or logarithmic (shape 0) otherwise."
      )
    fixed = float(shape)
  return TrialCount(distribution, float(mean), fixed)


def draw_trial_count(secret: bytes, count: TrialCount) -> int:
  """``K``, drawn from ``count`` with a stream keyed by the tuning's secret.

  A pure function of the secret, so a resumed tuning draws the same ``K``.
  Poisson: numpy's sampler on a Philox stream. Truncated negative binomial
  (``K >= 1``; Papernot-Steinke Def. 1, with dp_accounting's mapping from
  the mean to ``gamma``): inversion of the cumulative distribution.
  """
  rng = randomness.numpy_generator(secret, "tuning trial count", 0)
  if math.isinf(count.shape):
    return int(rng.poisson(count.mean))
  gamma = dp_accounting_adapter.truncated_negative_binomial_gamma(
    count.shape, count.mean
  )
  u = rng.random()
  eta, q = count.shape, 1.0 - gamma
  # Unnormalized weights w_k = C(k + eta - 1, k) q^k (eta > 0) or q^k / k.
  total = -math.log(gamma) if eta == 0 else gamma**-eta - 1.0
  k, weight, cumulative = 0, 1.0, 0.0
  while True:
    k += 1
    if eta == 0:
      weight = q**k / k
    else:
      weight *= q * (k + eta - 1) / k
    cumulative += weight / total
    if u < cumulative or k >= 1_000_000:  # the tail past 1e6 is ~0
      return k


# Mechanisms whose Poisson-subsampled step is bounded at integer orders by
# the sampled Gaussian of the same multiplier (the module docstring).
EXACT_MECHANISMS = (
  mech_values.DiscreteGaussian,
  vector_values.VectorDiscreteGaussian,
)


def same_event(held, plan) -> bool:
  """Whether a trial's plan ``held`` spends what the tuning's ``plan``
  accounts: the same plan but for the clip, which a search may set (the
  noise scales with it: the event, in clip units, is unchanged)."""
  return held.replace(clip=plan.clip) == plan


def step_rdp_event(plan) -> dp_accounting.DpEvent:
  """The event whose RDP at integer orders bounds one step of ``plan``.

  Exact noise (the default) and floating-point Gaussian noise (named weaker
  in every plan) have one; anything else is refused with the reason.
  """
  mech, sampling = plan.mechanism, plan.sampling
  exact = isinstance(mech, EXACT_MECHANISMS)
  if not (exact or type(mech) is mech_values.Gaussian):
    raise ValueError(
      "Tuning accounts a trial in Renyi DP, which bounds Poisson-subsampled "
      "Gaussian noise only (exact discrete or floating-point); this "
      f"estimator's plan is {plan.describe()}. Use a Gaussian-noise "
      "estimator, or choose its hyperparameters on public data "
      "(experiments/public_selection.py)."
    )
  if exact and sampling.name not in ("poisson", "full_batch"):
    raise ValueError(
      "The integer-order bound of the subsampled discrete Gaussian covers "
      f"Poisson sampling (or the full batch), not {sampling.describe()}; "
      "use config.privacy.sampling='poisson'."
    )
  return sampling.wrap(dp_accounting.GaussianDpEvent(mech.noise_multiplier))


def trial_event(
  step_event: dp_accounting.DpEvent, num_steps: int, score_noise: float
) -> dp_accounting.DpEvent:
  """One trial: ``num_steps`` private steps, then the noisy score."""
  return dp_accounting.ComposedDpEvent(
    [
      dp_accounting.SelfComposedDpEvent(step_event, int(num_steps)),
      dp_accounting.GaussianDpEvent(float(score_noise)),
    ]
  )


def total_event(trial: dp_accounting.DpEvent, count: TrialCount):
  return dp_accounting.dp_event.RepeatAndSelectDpEvent(
    trial, count.mean, count.shape
  )


def total_epsilon(
  trial: dp_accounting.DpEvent,
  count: TrialCount,
  *,
  delta: float,
  neighboring: str = "add_or_remove",
) -> float:
  """The RDP epsilon of the released best trial at ``delta``, every RDP
  taken at the integer orders of ``subsampled_rdp.ORDERS``."""
  return accounting.rdp_epsilon_and_order(
    total_event(trial, count),
    delta=delta,
    neighboring=neighboring,
    orders=subsampled_rdp.ORDERS,
  )[0]


def calibrate_trial_noise(
  plan,
  *,
  num_steps: int,
  score_noise: float,
  count: TrialCount,
  target_epsilon: float,
) -> float:
  """The smallest per-trial noise multiplier (to 1e-6 relative) whose
  tuning meets ``target_epsilon`` in total: the library's calibration
  (:func:`zoprivacy.privacy.calibrate`) under :func:`total_epsilon`.

  Raises ``ValueError`` if even very large noise cannot (the score's own
  cost and the trial count already exceed the target).
  """

  def total(trial_plan) -> float:
    event = trial_event(step_rdp_event(trial_plan), num_steps, score_noise)
    return total_epsilon(
      event, count, delta=trial_plan.delta, neighboring=trial_plan.neighboring
    )

  cap = 1e4
  if total(plan.with_noise_multiplier(cap)) > target_epsilon:
    raise ValueError(
      f"No per-trial noise meets total epsilon {target_epsilon:g}: even a "
      f"noise multiplier of {cap:g} gives "
      f"{total(plan.with_noise_multiplier(cap)):.4g} (the score noise "
      f"{score_noise:g} and the {count.describe()} trial count cost that "
      "much). Raise the target or the score noise, or lower the mean."
    )
  target = Target(target_epsilon, plan.delta, num_steps)
  return calibration.calibrate(
    plan, target, epsilon_of=total, rtol=1e-6
  ).noise_multiplier
