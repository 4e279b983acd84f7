"""The central-limit (GDP) start of the noise calibration: accurate where it
is used, and unable to change what the calibration returns."""

import math

import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from zoprivacy import accounting as acc
from zoprivacy import privacy
from zoprivacy.accounting import pld_size, search_start
from zoprivacy.privacy.calibration import noise_search

P, T, DELTA = 16 / 1000, 75000, 1e-5


@pytest.mark.parametrize(
  "mu",
  [0.3, 1.0, pytest.param(3.0, marks=pytest.mark.slow)],  # 3.0: 21 s
)
def test_gdp_delta_is_the_gaussian_mechanisms(mu):
  """mu-GDP is the Gaussian mechanism of sensitivity 1 and std 1/mu: the
  closed form is its delta(eps) from dp_accounting's fine PLD (built once
  per mu: seconds at this discretization)."""
  pld = pld_lib.from_gaussian_mechanism(
    1.0 / mu, value_discretization_interval=1e-5
  )
  for epsilon in (0.5, 2.0, 6.0):
    exact = search_start.gdp_delta(epsilon, mu)
    assert pld.get_delta_for_epsilon(epsilon) == pytest.approx(
      exact, rel=1e-3, abs=1e-12
    ), epsilon


def test_gdp_delta_does_not_overflow_at_huge_epsilon():
  assert search_start.gdp_delta(1e6, 1.0) == 0.0
  assert search_start.gdp_mu(1e6, 1e-5) is None


def test_gdp_mu_inverts_delta():
  mu = search_start.gdp_mu(1.0, DELTA)
  assert search_start.gdp_delta(1.0, mu) == pytest.approx(DELTA, rel=1e-6)


def test_without_sampling_the_estimate_is_exact():
  """T full-batch Gaussian steps are exactly sqrt(T)/sigma-GDP: the
  estimate is the fine PLD's calibrated multiplier to its discretization."""
  steps = 1000
  sigma = search_start.gdp_noise_multiplier(2.0, DELTA, 1.0, steps)
  res = privacy.calibrate_noise_multiplier(
    target_epsilon=2.0, delta=DELTA, sampling_probability=1.0, num_steps=steps
  )
  assert sigma == pytest.approx(res.noise_multiplier, rel=3e-3)


@pytest.mark.parametrize("target", [0.5, 1.0, 4.0])
def test_table16_starts_next_to_the_root_and_takes_two_evaluations(target):
  """DP-ZO Table 16: the start is within 0.3% of the calibrated multiplier
  and below the RDP warm start, and the search ends after two fine PLD
  evaluations (three from the RDP warm start alone)."""
  noise_search._fine_epsilon.cache_clear()  # pylint: disable=protected-access
  res = privacy.calibrate_noise_multiplier(
    target_epsilon=target, delta=DELTA, sampling_probability=P, num_steps=T
  )
  warm, _ = search_start.rdp_warm_start(target, DELTA, P, T, "add_or_remove")  # pylint: disable=protected-access
  start = search_start.first_point(
    target, DELTA, P, T, "add_or_remove", feasible=warm
  )
  assert start < warm
  assert abs(start / res.noise_multiplier - 1) < 3e-3
  assert res.num_pld_evaluations == 2
  assert res.epsilon <= target


@pytest.mark.parametrize("factor", [0.3, 0.97, 1.03])
def test_a_wrong_start_changes_nothing_but_the_evaluations(monkeypatch, factor):
  """Whatever the estimate says (below the root, above it, far off), the
  result is the same kind of certified bracket around the same root."""
  noise_search._fine_epsilon.cache_clear()  # pylint: disable=protected-access
  good = privacy.calibrate_noise_multiplier(
    target_epsilon=1.0, delta=DELTA, sampling_probability=P, num_steps=T
  )
  monkeypatch.setattr(
    search_start,
    "gdp_noise_multiplier",
    lambda *a: good.noise_multiplier * factor,
  )
  res = privacy.calibrate_noise_multiplier(
    target_epsilon=1.0, delta=DELTA, sampling_probability=P, num_steps=T
  )
  assert res.epsilon <= 1.0
  assert res.lower_bound < res.noise_multiplier <= res.lower_bound * 1.002
  assert abs(math.log(res.noise_multiplier / good.noise_multiplier)) < 4e-3


def test_a_start_too_small_to_account_falls_back_to_the_warm_start(
  monkeypatch,
):
  """A first point whose PLD would not fit in memory is not an error while
  the RDP warm start (feasible) is there to start from instead."""
  check = pld_size.check_pld_size
  refused = []

  def guard(sigma, *args, **kwargs):
    if sigma < 10.0:
      refused.append(sigma)
      raise pld_size.PLDTooLargeError(f"{sigma}: too many PLD points (limit)")
    return check(sigma, *args, **kwargs)

  monkeypatch.setattr(pld_size, "check_pld_size", guard)
  monkeypatch.setattr(search_start, "gdp_noise_multiplier", lambda *a: 5.0)
  noise_search._fine_epsilon.cache_clear()  # pylint: disable=protected-access
  acc.epsilon._lru_pld.cache_clear()  # pylint: disable=protected-access
  res = privacy.calibrate_noise_multiplier(
    target_epsilon=1.0, delta=DELTA, sampling_probability=P, num_steps=T
  )
  assert refused and refused[0] == pytest.approx(5.0 * (1 + search_start.RAISE))
  assert 16.3 < res.noise_multiplier < 16.5 and res.epsilon <= 1.0
