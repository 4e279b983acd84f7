"""Noise calibration: fast, returns the fine pessimistic PLD eps, <= target."""

import dp_accounting
import pytest
from dp_accounting import mechanism_calibration
from dp_accounting.pld import pld_privacy_accountant

from zoprivacy import accounting as acc
from zoprivacy.accounting import epsilon, pld_size, search_start
from zoprivacy.privacy import calibrate_noise_multiplier
from zoprivacy.privacy.calibration import noise_search

P = 16 / 1000
T = 75000
DELTA = 1e-5


@pytest.mark.parametrize(
  "target,paper_sigma", [(0.5, 30.9), (1.0, 16.4), (4.0, 4.8)]
)
def test_calibration_recovers_dpzo_table16(target, paper_sigma):
  res = calibrate_noise_multiplier(
    target_epsilon=target, delta=DELTA, sampling_probability=P, num_steps=T
  )
  assert abs(res.noise_multiplier - paper_sigma) / paper_sigma < 0.01
  # The returned epsilon is the fine (1e-4) pessimistic PLD epsilon of the
  # returned multiplier, recomputed independently here, and <= target.
  event = acc.poisson_gaussian_event(
    noise_multiplier=res.noise_multiplier,
    sampling_probability=P,
    num_steps=T,
  )
  ref = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
  ref.compose(event)
  # Same PLD as dp_accounting's own accountant; 1e-8 covers the oldest
  # supported dp_accounting (0.5.0 composes in another order: 1.4e-9).
  assert res.epsilon == pytest.approx(ref.get_epsilon(DELTA), rel=1e-8)
  assert res.epsilon <= target
  # Certificate: a multiplier within 0.2% below is over the target.
  assert res.lower_bound < res.noise_multiplier <= res.lower_bound * 1.002
  low_event = acc.poisson_gaussian_event(
    noise_multiplier=res.lower_bound, sampling_probability=P, num_steps=T
  )
  assert acc.pld_epsilon(low_event, delta=DELTA) > target
  assert res.num_pld_evaluations <= 8
  assert res.value_discretization_interval == 1e-4


def test_calibration_within_one_percent_of_dp_accounting_tight():
  """Against dp_accounting's own calibrate_dp_mechanism (brentq, 1e-4)."""
  target = 1.0

  def make_event(sigma):
    return dp_accounting.SelfComposedDpEvent(
      dp_accounting.PoissonSampledDpEvent(
        P, dp_accounting.GaussianDpEvent(sigma)
      ),
      T,
    )

  tight = mechanism_calibration.calibrate_dp_mechanism(
    lambda: pld_privacy_accountant.PLDAccountant(
      value_discretization_interval=1e-4
    ),
    make_event,
    target,
    DELTA,
    bracket_interval=mechanism_calibration.ExplicitBracketInterval(10.0, 25.0),
    tol=1e-4,
  )
  res = calibrate_noise_multiplier(
    target_epsilon=target, delta=DELTA, sampling_probability=P, num_steps=T
  )
  assert tight <= res.noise_multiplier * (1 + 1e-5)
  assert res.noise_multiplier <= tight * 1.01


def test_calibration_laplace_and_replace_one_and_full_batch():
  # Laplace: PLD (eps, delta), far below the pure-eps multiplier.
  res = calibrate_noise_multiplier(
    target_epsilon=0.3,
    delta=1e-5,
    sampling_probability=0.02,
    num_steps=2000,
    mechanism="laplace",
  )
  ev = acc.poisson_laplace_event(
    noise_multiplier=res.noise_multiplier,
    sampling_probability=0.02,
    num_steps=2000,
  )
  assert res.epsilon == acc.pld_epsilon(ev, delta=1e-5) <= 0.3
  assert res.epsilon > 0.3 * 0.99
  pure_b = acc.pure_laplace_noise_multiplier(
    target_epsilon=0.3, sampling_probability=0.02, num_steps=2000
  )
  assert res.noise_multiplier < 0.5 * pure_b
  # Replace-one (Poisson): needs more noise than add/remove.
  rep = calibrate_noise_multiplier(
    target_epsilon=1.0,
    delta=1e-5,
    sampling_probability=0.01,
    num_steps=1000,
    neighboring="replace_one",
  )
  add = calibrate_noise_multiplier(
    target_epsilon=1.0,
    delta=1e-5,
    sampling_probability=0.01,
    num_steps=1000,
  )
  assert rep.noise_multiplier > 1.3 * add.noise_multiplier
  ev = acc.poisson_gaussian_event(
    noise_multiplier=rep.noise_multiplier,
    sampling_probability=0.01,
    num_steps=1000,
  )
  assert (
    rep.epsilon
    == acc.pld_epsilon(ev, delta=1e-5, neighboring="replace_one")
    <= 1.0
  )
  # Full batch (p = 1), DPZero-style replace-one.
  full = calibrate_noise_multiplier(
    target_epsilon=2.0,
    delta=1e-5,
    sampling_probability=1.0,
    num_steps=100,
    neighboring="replace_one",
  )
  assert full.epsilon <= 2.0
  dpzero = acc.dpzero_advanced_composition_noise_multiplier(
    epsilon=2.0, delta=1e-5, num_steps=100
  )
  assert full.noise_multiplier < dpzero  # advanced composition is loose


_SETTING = dict(
  target_epsilon=1.0, delta=1e-5, sampling_probability=0.1, num_steps=10
)


@pytest.mark.parametrize(
  "change,message",
  [
    (
      dict(target_epsilon=1e-7, sampling_probability=1.0, num_steps=75000),
      "unreachable",
    ),
    (dict(target_epsilon=0.0), "target_epsilon"),
    (dict(delta=0.0), "delta"),
    (dict(sampling_probability=1.2), "sampling_probability"),
    (dict(num_steps=0), "num_steps"),
    (dict(mechanism="exponential"), "mechanism"),
    # Searched as the Gaussian, then on its plan's epsilon.
    (dict(mechanism="discrete_gaussian"), r"zoprivacy.privacy.calibrate\("),
    (dict(mechanism="none"), "non-private"),
    (
      dict(mechanism="laplace", neighboring="replace_one"),
      "laplace.*add/remove only",
    ),
  ],
)
def test_calibration_errors(change, message):
  with pytest.raises(ValueError, match=message):
    calibrate_noise_multiplier(**{**_SETTING, **change})


def _random_calibration_settings(n=6):
  """``n`` seeded ``(target, p, steps, delta)`` (T capped at 2000)."""
  import math

  import numpy as np

  rng = np.random.default_rng(7)
  out = []
  for _ in range(n):
    target = float(np.exp(rng.uniform(math.log(0.3), math.log(8.0))))
    p = float(np.exp(rng.uniform(math.log(1e-3), math.log(0.3))))
    steps = int(np.exp(rng.uniform(math.log(10), math.log(2000))))
    delta = float(np.exp(rng.uniform(math.log(1e-8), math.log(1e-4))))
    out.append((target, p, steps, delta))
  return out


@pytest.mark.parametrize(
  "half", [0, pytest.param(1, marks=pytest.mark.slow)]
)  # the default suite checks three settings; the slow step the other three
def test_calibration_on_random_settings(half):
  """Seeded settings (T capped at 2000 for run time): certified bracket."""
  for target, p, steps, delta in _random_calibration_settings()[
    3 * half : 3 * half + 3
  ]:
    res = calibrate_noise_multiplier(
      target_epsilon=target,
      delta=delta,
      sampling_probability=p,
      num_steps=steps,
    )
    ev = acc.poisson_gaussian_event(
      noise_multiplier=res.noise_multiplier,
      sampling_probability=p,
      num_steps=steps,
    )
    assert res.epsilon == acc.pld_epsilon(ev, delta=delta) <= target
    low = acc.poisson_gaussian_event(
      noise_multiplier=res.lower_bound,
      sampling_probability=p,
      num_steps=steps,
    )
    assert acc.pld_epsilon(low, delta=delta) > target
    assert res.noise_multiplier <= res.lower_bound * 1.002


@pytest.mark.parametrize(
  "target,p,steps",
  [(0.5, 16 / 1000, 75000), (2.0, 0.05, 300), (6.0, 0.2, 40)],
)
def test_first_secant_slope_is_the_pld_slope_to_within_a_quarter(
  target, p, steps
):
  """The RDP slope that starts the search (``d log eps / d log sigma`` at
  the warm start) is close to the fine PLD epsilon's own slope there, which
  is what lets the search bracket the root in 3-4 fine evaluations."""
  import math

  delta = 1e-5
  warm, slope = search_start.rdp_warm_start(
    target, delta, p, steps, "add_or_remove"
  )
  h = 0.02
  up, down = (
    acc.pld_epsilon(
      acc.poisson_gaussian_event(
        noise_multiplier=warm * math.exp(s),
        sampling_probability=p,
        num_steps=steps,
      ),
      delta=delta,
    )
    for s in (h, -h)
  )
  pld_slope = (math.log(up) - math.log(down)) / (2 * h)
  assert slope < 0 and pld_slope < 0
  assert abs(slope - pld_slope) <= 0.25 * abs(pld_slope), (slope, pld_slope)
  res = calibrate_noise_multiplier(
    target_epsilon=target,
    delta=delta,
    sampling_probability=p,
    num_steps=steps,
  )
  assert res.epsilon <= target and res.num_pld_evaluations <= 4


def _laplace_with_guard(monkeypatch, refuse_below):
  """Calibrates Laplace at eps 4, p 0.02, T 300 (multiplier 0.4218; the
  search visits 0.4026 on the way) with the PLD memory guard refusing every
  multiplier below ``refuse_below``."""

  check = pld_size.check_pld_size
  refused = []

  def guard(sigma, count, p, interval, rel):
    if sigma < refuse_below:
      refused.append(sigma)
      raise pld_size.PLDTooLargeError(f"PLD points over the limit at {sigma}")
    return check(sigma, count, p, interval, rel)

  monkeypatch.setattr(pld_size, "check_pld_size", guard)
  # Fresh caches: a PLD or epsilon cached by an earlier test skips the guard.
  noise_search._fine_epsilon.cache_clear()  # pylint: disable=protected-access
  epsilon._lru_pld.cache_clear()  # pylint: disable=protected-access
  kwargs = dict(sampling_probability=0.02, num_steps=300)
  try:
    r = calibrate_noise_multiplier(
      target_epsilon=4.0, delta=1e-5, mechanism="laplace", **kwargs
    )
  finally:
    monkeypatch.setattr(pld_size, "check_pld_size", check)
  exact = acc.pld_epsilon(
    acc.poisson_laplace_event(noise_multiplier=r.noise_multiplier, **kwargs),
    delta=1e-5,
  )
  return r, refused, exact


def test_a_refused_multiplier_below_the_root_moves_the_search_up(monkeypatch):
  """A secant step that lands on a multiplier too small to account (as
  0.28 over 2,000 steps did in the DP-ZO Laplace rows) counts as too little
  noise: the search goes on and returns the calibrated multiplier."""
  r, refused, exact = _laplace_with_guard(monkeypatch, refuse_below=0.41)
  assert refused  # the guard was hit
  assert 0.4210 <= r.noise_multiplier <= 0.4218 * 1.002
  assert r.epsilon == exact <= 4.0


def test_a_root_below_what_can_be_accounted_is_an_error(monkeypatch):

  with pytest.raises(pld_size.PLDTooLargeError, match="PLD points"):
    _laplace_with_guard(monkeypatch, refuse_below=0.45)
