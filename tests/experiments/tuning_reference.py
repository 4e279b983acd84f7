"""A tuning's total epsilon computed by hand, independently of dp_accounting
(and the tuner tests' small config, :func:`small_config`).

The RDP of one trial at integer orders ``a`` (the sampled Gaussian's
binomial expansion, Mironov, Talwar and Zhang 2019, Sec. 3.3, composed over
the steps, plus the score's ``a / (2 s^2)``), then Papernot and Steinke
(2022) Thm. 6 (Poisson) or Thm. 2 (truncated negative binomial), then the
RDP-to-DP conversion of Canonne, Kamath and Steinke (2020, Prop. 12).
"""

import math

import numpy as np

from configs import default
from zoprivacy.privacy import PrivacyPlan


def small_config(workdir, **changes):
  """The default config with a small MLP and 30 steps, in ``workdir``."""
  config = default.get_config()
  config.update(
    model="mlp", num_steps=30, eval_every=0, checkpoint_every=0, **changes
  )
  config.model_kwargs = {"hidden": (16,)}
  config.workdir = str(workdir)
  return config


def plan(mechanism="discrete_gaussian", **changes) -> PrivacyPlan:
  """The tests' trial plan: 64 of 1150 examples per step, delta 1e-5."""
  flat = dict(
    noise_multiplier=1.0,
    clip=1.0,
    expected_batch_size=64,
    dataset_size=1150,
    delta=1e-5,
  )
  return PrivacyPlan.build(mechanism=mechanism, **{**flat, **changes})


ORDERS = np.array(list(range(2, 129)) + [160, 192, 256, 384, 512, 768, 1024])


def _logsumexp(x):
  m = np.max(x)
  return m + math.log(np.sum(np.exp(x - m)))


def sampled_gaussian_rdp(p: float, sigma: float, a: int) -> float:
  """``log E_Q[(P/Q)^a] / (a - 1)`` for ``P = (1-p) N(0, s^2) + p N(1,
  s^2)``, ``Q = N(0, s^2)``, integer ``a``: the exact binomial sum."""
  if p >= 1.0:
    return a / (2 * sigma**2)
  k = np.arange(a + 1, dtype=np.float64)
  log_binom = np.array(
    [
      math.lgamma(a + 1) - math.lgamma(j + 1) - math.lgamma(a - j + 1)
      for j in k
    ]
  )
  terms = (
    log_binom
    + (a - k) * math.log1p(-p)
    + k * math.log(p)
    + k * (k - 1) / (2 * sigma**2)
  )
  return _logsumexp(terms) / (a - 1)


def trial_rdp(p, sigma, steps, score_noise) -> np.ndarray:
  return np.array(
    [
      steps * sampled_gaussian_rdp(p, sigma, int(a)) + a / (2 * score_noise**2)
      for a in ORDERS
    ]
  )


def _delta_at(rdp: np.ndarray, eps: float) -> float:
  """The smallest delta the RDP curve gives at ``eps``: Prop. 12 of
  Canonne, Kamath and Steinke, or ``sqrt(1 - exp(-KL))`` (Bretagnolle and
  Huber; the divergence at any order >= 1 bounds KL)."""
  prop12 = (ORDERS - 1) * (rdp - eps + np.log1p(-1 / ORDERS)) - np.log(ORDERS)
  kl = 0.5 * np.log1p(-np.exp(-rdp))
  return float(np.exp(np.min(np.minimum(prop12, kl))))


def _gamma(shape: float, mean: float) -> float:
  """The truncated negative binomial's ``gamma`` with mean ``mean``."""

  def mean_of(g):
    if shape == 0:
      return (1 / g - 1) / math.log(1 / g)
    return shape * (1 / g - 1) / (1 - g**shape)

  if shape == 1:
    return 1 / mean
  lo, hi = 1e-300, 1.0 - 1e-15
  for _ in range(200):  # the mean decreases in gamma
    mid = (lo + hi) / 2
    lo, hi = (mid, hi) if mean_of(mid) > mean else (lo, mid)
  return lo


def repeat_and_select(rdp: np.ndarray, mean: float, shape: float):
  a = ORDERS.astype(np.float64)
  if math.isinf(shape):  # Thm. 6: e^eps_hat = 1 + 1 / (a - 1)
    deltas = np.array([_delta_at(rdp, math.log1p(1 / (x - 1))) for x in a])
    return rdp + mean * deltas + math.log(mean) / (a - 1)
  gamma = _gamma(shape, mean)  # Thm. 2, the best lambda-hat of ORDERS
  c = (1 + shape) * np.min((1 - 1 / a) * rdp + math.log(1 / gamma) / a)
  out = rdp + math.log(mean) / (a - 1) + c
  return np.minimum.accumulate(out[::-1])[::-1]  # RDP grows with the order


def epsilon(rdp: np.ndarray, delta: float) -> float:
  a = ORDERS.astype(np.float64)
  return float(np.min(rdp + np.log1p(-1 / a) - np.log(delta * a) / (a - 1)))


def total_epsilon(p, sigma, steps, score_noise, mean, shape, delta) -> float:
  rdp = trial_rdp(p, sigma, steps, score_noise)
  return epsilon(repeat_and_select(rdp, mean, shape), delta)
