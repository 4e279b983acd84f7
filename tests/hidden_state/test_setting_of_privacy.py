"""Noisy-ZOGD's setting built from the run's one privacy value."""

import pytest

import zoprivacy
from zoprivacy import hidden_state
from zoprivacy.hidden_state import privacy as privacy_lib
from zoprivacy.privacy.value import PrivacyValueError

N, D, K = 1000, 64, 8
HYPER = dict(dimension=D, num_directions=K, step_size=0.5, radius=1.0)


def value(**changes):
  fields = dict(
    clip=1.5,
    noise=zoprivacy.SecureMode(),
    neighboring="replace_one",
    sampling=zoprivacy.FullBatch(N),
    noise_multiplier=3.0,
  )
  return zoprivacy.Privacy(**{**fields, **changes})


def test_clip_sizes_and_noise_come_from_the_value():
  setting = hidden_state.setting_of_privacy(value(), **HYPER)
  assert (setting.clip, setting.dataset_size, setting.batch_size) == (
    1.5,
    N,
    None,
  )
  assert privacy_lib.plan_multiplier(setting) == pytest.approx(3.0)
  plan = hidden_state.composition_plan(setting)
  assert plan.noise_multiplier == pytest.approx(3.0)
  mini = value(
    sampling=zoprivacy.WithoutReplacement(dataset_size=N, batch_size=50)
  )
  setting = hidden_state.setting_of_privacy(mini, **HYPER)
  assert (setting.dataset_size, setting.batch_size) == (N, 50)
  default = hidden_state.setting_of_privacy(value(clip=None), **HYPER)
  assert default.clip == hidden_state.from_privacy.DEFAULT_CLIP


def test_the_one_conversion_round_trips_the_papers_sigma():
  """sigma -> noise_multiplier -> sigma; the formula of the docstring:
  (b sigma / Delta) sqrt(beta + (1 - beta) K / d)."""
  sigma = 2e-3
  m = hidden_state.noise_multiplier_of_std(sigma, value(), **HYPER)
  assert m == pytest.approx(N * sigma / 1.5 * (0.5 + 0.5 * K / D) ** 0.5)
  setting = hidden_state.setting_of_privacy(value(noise_multiplier=m), **HYPER)
  assert setting.noise_std == pytest.approx(sigma)


def test_a_target_is_calibrated_by_the_one_calibration():
  target = zoprivacy.Target(epsilon=2.0, delta=1e-5, num_steps=20)
  privacy = value(noise_multiplier=None, target=target)
  setting = hidden_state.setting_of_privacy(privacy, **HYPER)
  plan = hidden_state.composition_plan(setting)
  spent = plan.epsilon(20, 1e-5)
  assert 1.99 < spent <= 2.0  # the smallest multiplier, to 0.2%
  # A value holding both is checked against its target.
  low = value(noise_multiplier=plan.noise_multiplier / 2, target=target)
  with pytest.raises(PrivacyValueError, match="above the value's target"):
    hidden_state.setting_of_privacy(low, **HYPER)


@pytest.mark.parametrize(
  "changes, match",
  [
    (dict(noise=zoprivacy.Exact()), "cannot draw Exact"),
    (dict(noise=zoprivacy.Float()), "cannot draw Float"),
    (dict(noise=zoprivacy.TestNoise(0)), "cannot draw Exact"),
    (dict(neighboring="add_or_remove"), "replace-one"),
    (dict(mechanism="laplace"), "Gaussian"),
    (dict(num_queries=3), "num_queries=3"),
    (dict(sampling=None), "no sampling"),
    (
      dict(sampling=zoprivacy.Poisson(dataset_size=N, expected_batch_size=10)),
      "'poisson' sampling",
    ),
    (dict(noise_multiplier=None), "sets no noise"),
    (dict(assume_sampling=True), "does not take assume_sampling=True"),
  ],
)
def test_a_value_it_cannot_honour_is_refused(changes, match):
  with pytest.raises(PrivacyValueError, match=match):
    hidden_state.setting_of_privacy(value(**changes), **HYPER)


def test_test_noise_of_secure_mode_and_k_queries_are_accepted():
  privacy = value(noise=zoprivacy.TestNoise(7, zoprivacy.SecureMode()))
  hidden_state.setting_of_privacy(privacy.replace(num_queries=K), **HYPER)
  assert privacy.test_seed == 7


def test_the_chains_noise_multiplier_keyword_is_deprecated():
  setting = hidden_state.setting_of_privacy(value(), **HYPER)
  with pytest.warns(DeprecationWarning, match="setting_of_privacy"):
    est = zoprivacy.noisy_zogd_chain(
      setting.replace(smoothing=1e-3), noise_multiplier=6.0
    )
  assert est.privacy_plan.noise_multiplier == pytest.approx(6.0)
