"""Cross-checks over seeded random settings.

* PLD eps <= RDP eps (both are upper bounds; PLD is the tight one). For run
  time, T is capped at 2000 for this comparison (the drawn T is in
  [10, 1e5]; the whole loop takes ~10 s on 2 cores).
* T = 1: the PLD epsilon agrees within 1e-3 with the hockey-stick divergence
  of DP-ZO App. A eq. (4), integrated numerically here with scipy (add and
  remove directions separately), and is never below it (pessimistic).
"""

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from zoprivacy import accounting as acc

PLD_RDP_T_CAP = 2000


def _settings(seed, n=20):
  rng = np.random.default_rng(seed)
  out = []
  for _ in range(n):
    sigma = float(np.exp(rng.uniform(math.log(0.5), math.log(50.0))))
    p = float(np.exp(rng.uniform(math.log(1e-3), math.log(0.5))))
    steps = int(np.exp(rng.uniform(math.log(10), math.log(1e5))))
    delta = float(np.exp(rng.uniform(math.log(1e-8), math.log(1e-3))))
    out.append((sigma, p, steps, delta))
  return out


@pytest.mark.parametrize(
  "half", [0, pytest.param(1, marks=pytest.mark.slow)]
)  # the default suite checks ten settings; the slow step the other ten
def test_pld_never_above_rdp_on_random_settings(half):
  for sigma, p, steps, delta in _settings(1234)[10 * half : 10 * half + 10]:
    steps = min(steps, PLD_RDP_T_CAP)
    event = acc.poisson_gaussian_event(
      noise_multiplier=sigma, sampling_probability=p, num_steps=steps
    )
    e_pld = acc.pld_epsilon(event, delta=delta)
    e_rdp = acc.rdp_epsilon(event, delta=delta)
    assert 0.0 < e_pld <= e_rdp, (sigma, p, steps, delta, e_pld, e_rdp)


def _hockey_stick(upper, lower, alpha, lo, hi):
  """H_alpha(upper || lower) = int (upper(x) - alpha lower(x))_+ dx, x in [lo, hi]."""
  val, _ = integrate.quad(
    lambda x: max(upper(x) - alpha * lower(x), 0.0),
    lo,
    hi,
    epsabs=1e-14,
    epsrel=1e-10,
    limit=500,
  )
  return val


def _exact_deltas(sigma, p, eps):
  """(delta_remove, delta_add) of one Poisson-subsampled Gaussian at eps.

  DP-ZO eq. (4) (Zhu et al. Prop. A.8), with the Gaussian mechanism's pair
  N(0, s^2), N(1, s^2):
    remove: H_{e^eps}((1-p) N(0,s^2) + p N(1,s^2) || N(0,s^2))
    add:    H_{e^eps}(N(0,s^2) || (1-p) N(0,s^2) + p N(1,s^2))
  The likelihood ratio mix/N(0) = (1-p) + p exp((2x-1)/(2 s^2)) is increasing,
  so each integrand is positive on a half line; integrate it numerically
  over a window of 40 standard deviations from the crossing point.
  """
  alpha = math.exp(eps)
  c = 1.0 / (sigma * math.sqrt(2.0 * math.pi))

  def n0(x):
    return c * math.exp(-x * x / (2.0 * sigma * sigma))

  def n1(x):
    return c * math.exp(-(x - 1.0) * (x - 1.0) / (2.0 * sigma * sigma))

  def mix(x):
    return (1.0 - p) * n0(x) + p * n1(x)

  # remove: mix > alpha * n0  <=>  x > x_r
  x_r = sigma**2 * math.log((alpha - (1.0 - p)) / p) + 0.5
  d_remove = _hockey_stick(mix, n0, alpha, x_r, x_r + 40.0 * sigma)
  # add: n0 > alpha * mix  <=>  (1-p) + p e^{...} < 1/alpha  <=>  x < x_a
  if 1.0 / alpha <= 1.0 - p:
    d_add = 0.0
  else:
    x_a = sigma**2 * math.log((1.0 / alpha - (1.0 - p)) / p) + 0.5
    d_add = _hockey_stick(n0, mix, alpha, x_a - 40.0 * sigma, x_a)
  return d_remove, d_add


def _exact_epsilon(sigma, p, delta, direction=None):
  def gap(eps):
    d_r, d_a = _exact_deltas(sigma, p, eps)
    d = {"remove": d_r, "add": d_a, None: max(d_r, d_a)}[direction]
    return d - delta

  if gap(0.0) <= 0:
    return 0.0
  hi = 1.0
  while gap(hi) > 0:
    hi *= 2.0
  return optimize.brentq(gap, 0.0, hi, xtol=1e-9)


def test_exact_hockey_stick_matches_closed_form():
  """Sanity check of the integrator against the Gaussian-CDF closed form."""
  sigma, p, eps = 1.3, 0.2, 0.7
  alpha = math.exp(eps)
  x_r = sigma**2 * math.log((alpha - (1 - p)) / p) + 0.5
  closed = (
    (1 - p) * stats.norm.sf(x_r / sigma)
    + p * stats.norm.sf((x_r - 1) / sigma)
    - alpha * stats.norm.sf(x_r / sigma)
  )
  assert _exact_deltas(sigma, p, eps)[0] == pytest.approx(closed, rel=1e-8)


def test_single_step_pld_matches_numerical_integration():
  for sigma, p, _, delta in _settings(4321):
    event = acc.poisson_gaussian_event(
      noise_multiplier=sigma, sampling_probability=p, num_steps=1
    )
    e_pld = acc.pld_epsilon(event, delta=delta)
    e_exact = _exact_epsilon(sigma, p, delta)
    assert abs(e_pld - e_exact) <= 1e-3, (sigma, p, delta, e_pld, e_exact)
    # Pessimistic: never below the exact value.
    assert e_pld >= e_exact - 1e-9, (sigma, p, delta, e_pld, e_exact)


def test_single_step_directions_match_numerical_integration():
  for sigma, p, delta in [
    (0.8, 0.3, 1e-5),
    (2.0, 0.05, 1e-6),
    (1.0, 0.5, 1e-3),
  ]:
    event = acc.poisson_gaussian_event(
      noise_multiplier=sigma, sampling_probability=p, num_steps=1
    )
    split = acc.pld_epsilon_by_direction(event, delta=delta)
    assert split.remove == pytest.approx(
      _exact_epsilon(sigma, p, delta, "remove"), abs=1e-3
    )
    assert split.add == pytest.approx(
      _exact_epsilon(sigma, p, delta, "add"), abs=1e-3
    )
