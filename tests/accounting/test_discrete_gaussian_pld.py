"""The numpy build of the discrete Gaussian's PLD is dp_accounting's PLD:
the same PMFs bit for bit, so the same epsilon after any number of steps
(never below it), at a small fraction of its per-point calls."""

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from pld_equality import assert_same_pld

from zoprivacy.accounting import discrete_gaussian_pld as fast
from zoprivacy.accounting import discrete_pld
from zoprivacy.accounting import dp_accounting_adapter as adapter


def _reference(sigma, m, q, interval, replace):
  """dp_accounting's own PLD (the adapter's loss for replace-one)."""
  if replace:
    loss = adapter.DiscreteGaussianReplaceLoss(
      sigma,
      sensitivity=m,
      sampling_prob=q,
      adjacency_type=adapter.AdjacencyType.REPLACE,
    )
    return adapter.monotone_loss_pld(loss, interval)
  return pld_lib.from_discrete_gaussian_mechanism(
    sigma,
    sensitivity=m,
    pessimistic_estimate=True,
    value_discretization_interval=interval,
    sampling_prob=q,
    use_connect_dots=True,
  )


def _settings(seed: int, count: int, sensitivities, steps=(1, 10, 300, 4000)):
  """Random (sigma, m, q, interval, relation, T, delta) settings; full
  batches (q = 1) compose at most 10 steps (their wide PMFs take minutes
  to compose 4,000 times, twice)."""
  rng = np.random.default_rng(seed)
  for _ in range(count):
    m = int(rng.choice(sensitivities))
    z = float(np.exp(rng.uniform(math.log(0.5), math.log(10.0))))
    q = float(rng.choice([1.0, 10 ** rng.uniform(-3, -0.3)]))
    interval = float(rng.choice([1e-4, 1e-3]))
    replace = bool(rng.integers(2))
    t = int(rng.choice(steps))
    yield (
      z * m,
      m,
      q,
      interval,
      replace,
      min(t, 10) if q == 1.0 else t,
      float(10 ** rng.uniform(-8, -3)),
    )


def _check(setting):
  sigma, m, q, interval, replace, steps, delta = setting
  theirs = _reference(sigma, m, q, interval, replace)
  step = dict(sensitivity=m, sampling_prob=q, replace=replace)
  ours = fast.discrete_gaussian_pld(
    sigma, value_discretization_interval=interval, **step
  )
  assert_same_pld(ours, theirs)
  if steps > 1:
    ours, theirs = ours.self_compose(steps), theirs.self_compose(steps)
  mine = ours.get_epsilon_for_delta(delta)
  reference = theirs.get_epsilon_for_delta(delta)
  assert mine >= reference and mine - reference <= 1e-4  # in fact equal
  assert mine == reference


@pytest.mark.parametrize(
  "setting",
  list(_settings(0, 8, (1, 2, 3, 32), steps=(1,)))
  + [(60.0, 32, 0.05, 1e-4, False, 300, 1e-5)],
)
def test_a_few_random_settings_equal_dp_accounting(setting):
  """One step each (the same PMFs compose to the same PLD: composing a
  full-batch PMF costs seconds), and one subsampled run of 300 steps."""
  _check(setting)


@pytest.mark.slow
@pytest.mark.parametrize("setting", list(_settings(1, 60, (1, 3, 32, 1024))))
def test_sixty_random_settings_equal_dp_accounting(setting):
  """At least 50 random (sigma, p, T, relation) settings, the runner's
  sensitivity of 1024 among them (about a minute on 2 cores)."""
  _check(setting)


@pytest.mark.slow
@pytest.mark.parametrize(
  "replace", [False, True], ids=["add_remove", "replace"]
)
def test_the_default_runs_setting_equals_dp_accounting(replace):
  """The default run: multiplier 5.686 on a grid of 1024, p = 64/1437,
  4,000 steps, delta = 1e-5."""
  _check((5.686 * 1024, 1024, 64 / 1437, 1e-4, replace, 4000, 1e-5))


def test_it_calls_dp_accountings_scalar_code_a_handful_of_times(monkeypatch):
  """The cost the numpy build removes: dp_accounting evaluates the loss at
  every integer of the support (here ~12,000) and the inverse at every
  rounded loss. The build calls either only where numpy could round
  differently (a handful), and is what the plan's discrete PLD uses."""
  calls = {"loss": 0, "inverse": 0}
  cls = adapter.DiscreteGaussianReplaceLoss
  loss, inverse = cls.privacy_loss, cls.inverse_privacy_loss

  def count(name, fn):
    def wrapper(self, value):
      calls[name] += 1
      return fn(self, value)

    return wrapper

  monkeypatch.setattr(cls, "privacy_loss", count("loss", loss))
  monkeypatch.setattr(cls, "inverse_privacy_loss", count("inverse", inverse))
  discrete_pld._single_pld.cache_clear()
  pld = discrete_pld.discrete_noise_pld(
    sigma=512.0, sensitivity=128, sampling_probability=0.05, num_steps=1
  )
  assert 0 < pld.get_epsilon_for_delta(1e-5) < math.inf
  assert calls["loss"] <= 20 and calls["inverse"] <= 200, calls
  discrete_pld._single_pld.cache_clear()
