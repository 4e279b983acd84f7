"""What a repeat-and-select tuning spends, and the per-trial noise that fits.

Papernot and Steinke (2022, arXiv 2110.03620): run a private mechanism a
random number ``K`` of times, ``K`` drawn from a Poisson, or a truncated
negative binomial (geometric, logarithmic), and release only the best run.
Thm. 2 (negative binomial) and Thm. 6 (Poisson) bound the Renyi DP of the
whole from one run's; dp_accounting's RDP accountant implements both as
``RepeatAndSelectDpEvent(trial_event, mean, shape)``.

One trial here is a whole private training run (``num_steps`` Poisson
subsampled Gaussian steps, a ``SelfComposedDpEvent``) followed by its
selection score: the count of correct predictions on a private validation
split plus exact discrete Gaussian noise (sensitivity one under
add/remove). The score's event is ``GaussianDpEvent(score_noise)``: the
discrete Gaussian's Renyi divergences are at most the continuous
Gaussian's (Canonne, Kamath and Steinke 2020, Prop. 5), so it dominates.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import dp_accounting
import numpy as np

from zoprivacy import accounting
from zoprivacy.accounting import dp_accounting_adapter
from zoprivacy.privacy import randomness

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
  """The RDP epsilon of the released best trial at ``delta``."""
  return accounting.rdp_epsilon(
    total_event(trial, count), delta=delta, neighboring=neighboring
  )


def calibrate_trial_noise(
  plan,
  *,
  num_steps: int,
  score_noise: float,
  count: TrialCount,
  target_epsilon: float,
  iterations: int = 60,
) -> float:
  """The smallest per-trial noise multiplier (to 1e-6 relative, rounded up)
  whose tuning meets ``target_epsilon`` in total.

  Raises ``ValueError`` if even very large noise cannot (the score's own
  cost and the trial count already exceed the target).
  """

  def total(sigma: float) -> float:
    event = trial_event(
      plan.with_noise_multiplier(sigma).step_event(), num_steps, score_noise
    )
    return total_epsilon(
      event, count, delta=plan.delta, neighboring=plan.neighboring
    )

  cap = 1e4
  if total(cap) > target_epsilon:
    raise ValueError(
      f"No per-trial noise meets total epsilon {target_epsilon:g}: even a "
      f"noise multiplier of {cap:g} gives {total(cap):.4g} (the score noise "
      f"{score_noise:g} and the {count.describe()} trial count cost that "
      "much). Raise the target or the score noise, or lower the mean."
    )
  hi = 1.0
  while total(hi) > target_epsilon:  # bracket: double from 1
    hi *= 2.0
  lo = hi / 2.0
  if hi == 1.0:  # already met at 1: search below it
    lo = 1e-2
    if total(lo) <= target_epsilon:
      return lo
  for _ in range(iterations):
    mid = math.sqrt(lo * hi)
    if total(mid) > target_epsilon:
      lo = mid
    else:
      hi = mid
    if hi / lo < 1 + 1e-6:
      break
  return float(np.nextafter(hi, np.inf))
