"""Repeat-and-select tuning: its accounting, its secret trial count and its
refusals (the end-to-end runs are in test_tune_slow.py)."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import tuning_reference
from dp_accounting.rdp import rdp_privacy_accountant

from configs import default
from experiments import tune
from experiments.tuning import budget, search, store, trials
from zoprivacy.privacy import randomness

PLAN = tuning_reference.plan()
FLOAT_PLAN = tuning_reference.plan("gaussian")


@pytest.mark.parametrize(
  "name,shape",
  [
    ("poisson", None),
    ("geometric", None),
    ("logarithmic", None),
    ("negative_binomial", 0.5),
  ],
)
def test_total_agrees_with_an_independent_computation(name, shape):
  """Exact noise (the default), 400 steps at p = 64/1150 and multiplier 4,
  score noise 5, mean 3: the tuner's total equals the hand computation of
  tuning_reference (sampled-Gaussian RDP at integer orders, Papernot-Steinke,
  Canonne-Kamath-Steinke conversion), written without dp_accounting."""
  count = budget.trial_count(name, 3.0, shape)
  step = budget.step_rdp_event(PLAN.with_noise_multiplier(4.0))
  ours = budget.total_epsilon(
    budget.trial_event(step, 400, 5.0), count, delta=1e-5
  )
  theirs = tuning_reference.total_epsilon(
    64 / 1150, 4.0, 400, 5.0, 3.0, count.shape, 1e-5
  )
  assert ours == pytest.approx(theirs, rel=1e-9)
  # Integer orders only: never below dp_accounting's default (fractional)
  # orders, which the discrete Gaussian's bound does not reach.
  default_orders = rdp_privacy_accountant.RdpAccountant()
  default_orders.compose(
    budget.total_event(budget.trial_event(step, 400, 5.0), count)
  )
  assert ours >= default_orders.get_epsilon(1e-5)
  # Repeat-and-select costs more than one trial.
  assert PLAN.with_noise_multiplier(4.0).epsilon(400) < 0.75 * theirs


def test_the_float_option_is_accounted_alike_and_named_weaker():
  """Floating-point trials have the same step event (the sampled
  Gaussian's), and the report names their noise as the weaker option."""
  exact = budget.step_rdp_event(PLAN.with_noise_multiplier(4.0))
  floating = budget.step_rdp_event(FLOAT_PLAN.with_noise_multiplier(4.0))
  assert exact == floating == FLOAT_PLAN.with_noise_multiplier(4.0).step_event()
  assert "WEAKER" in tune.NOISE[FLOAT_PLAN.noise_kind]
  assert tune.NOISE[PLAN.noise_kind] == "exact discrete Gaussian"
  assert "exact integer noise" in PLAN.describe()
  assert "floating-point" in FLOAT_PLAN.describe()


def test_plans_without_an_integer_order_bound_are_refused():
  for mechanism in ("laplace", "discrete_laplace"):
    with pytest.raises(ValueError, match="Gaussian noise only"):
      budget.step_rdp_event(tuning_reference.plan(mechanism))
  fixed = tuning_reference.plan(sampling="without_replacement")
  with pytest.raises(ValueError, match="Poisson sampling"):
    budget.step_rdp_event(fixed)


def test_a_searched_clip_keeps_the_trials_event():
  """The search may set privacy.clip (default_search.py does): a trial at
  another clip spends the tuning's event; any other change is refused."""
  assert budget.same_event(PLAN.replace(clip=2.0), PLAN)
  assert not budget.same_event(PLAN.with_noise_multiplier(2.0), PLAN)
  assert not budget.same_event(FLOAT_PLAN, PLAN)
  assert not budget.same_event(PLAN.replace(expected_batch_size=32), PLAN)


def test_the_trials_keep_exact_noise():
  """trial_base no longer overrides the user's noise: the default config's
  trials add exact discrete noise, and privacy.noise='float' stays the
  opt-in."""
  config = default.get_config()
  assert trials.trial_base(config).privacy.noise == "exact"
  config.privacy.noise = "float"
  assert trials.trial_base(config).privacy.noise == "float"


def test_the_noisy_score_is_an_exact_integer_count():
  """The score is the integer count plus integer noise, a function of the
  tuning secret and the trial (a resumed tuning draws it again)."""
  secret = randomness.new_secret()
  scores = [trials.noisy_score(0.75, 280, secret, i, 5.0) for i in range(50)]
  assert all(type(s) is int for s in scores)
  assert scores[3] == trials.noisy_score(0.75, 280, secret, 3, 5.0)
  # 50 draws around 210 with noise parameter 5: all equal with probability
  # below 0.06^49; the mean is off by 6 standard errors (6 * 5 / sqrt(50))
  # with probability below 2e-9.
  assert len(set(scores)) > 1
  assert abs(np.mean(scores) - 210) < 6 * 5 / math.sqrt(50)


def test_the_trial_count_is_a_function_of_the_secret():
  count = budget.trial_count("poisson", 3.0)
  secret = randomness.new_secret()
  assert budget.draw_trial_count(secret, count) == budget.draw_trial_count(
    secret, count
  )


def test_two_tunings_draw_different_trial_counts(tmp_path):
  """Two workdirs of the same config get two OS-entropy secrets, and K
  varies with the secret. Over 200 fresh secrets, Poisson(3) gives a single
  value with probability at most max_k P(K=k)^199 = 0.224^199 < 1e-129:
  the false-failure rate of the second assertion."""
  a = store.load_or_create_secret(str(tmp_path / "a"), None)
  b = store.load_or_create_secret(str(tmp_path / "b"), None)
  assert a != b
  assert store.load_or_create_secret(str(tmp_path / "a"), None) == a
  count = budget.trial_count("poisson", 3.0)
  draws = {
    budget.draw_trial_count(randomness.new_secret(), count) for _ in range(200)
  }
  assert len(draws) >= 2


def _tnb_pmf(shape, mean, kmax):
  gamma = rdp_privacy_accountant._gamma_truncated_negative_binomial(shape, mean)
  k = np.arange(1, kmax + 1, dtype=np.float64)
  if shape == 0:
    w = (1 - gamma) ** k / k
  else:
    w = np.exp(
      np.array([math.lgamma(x + shape) - math.lgamma(x + 1) for x in k])
      - math.lgamma(shape)
      + k * math.log(1 - gamma)
    )
  return w / w.sum()


@pytest.mark.parametrize(
  "name,shape",
  [("geometric", None), ("logarithmic", None), ("negative_binomial", 0.5)],
)
def test_negative_binomial_draws_have_the_accounted_mean(name, shape):
  """The empirical mean of 4000 draws lies within 6 standard errors of the
  mean dp_accounting accounts for (false-failure rate < 2e-9, by the
  normal approximation of the mean of 4000 draws)."""
  count = budget.trial_count(name, 3.0, shape)
  pmf = _tnb_pmf(count.shape, 3.0, 2000)
  k = np.arange(1, 2001)
  mean, var = (pmf * k).sum(), (pmf * k**2).sum() - (pmf * k).sum() ** 2
  assert mean == pytest.approx(3.0, rel=1e-6)
  draws = np.array(
    [
      budget.draw_trial_count(randomness.new_secret(), count)
      for _ in range(4000)
    ]
  )
  assert draws.min() >= 1
  assert abs(draws.mean() - mean) < 6 * math.sqrt(var / 4000)


def test_poisson_draws_have_the_accounted_mean():
  """4000 Poisson(3) draws: mean within 6 standard errors (sqrt(3/4000)),
  false-failure rate < 2e-9."""
  count = budget.trial_count("poisson", 3.0)
  draws = [
    budget.draw_trial_count(randomness.new_secret(), count) for _ in range(4000)
  ]
  assert abs(np.mean(draws) - 3.0) < 6 * math.sqrt(3.0 / 4000)


def test_a_mean_of_zero_trials_is_refused():
  for mean in (0.0, 0.5, math.nan):
    with pytest.raises(ValueError, match="at least 1"):
      budget.trial_count("poisson", mean)
  with pytest.raises(ValueError, match="shape"):
    budget.trial_count("negative_binomial", 3.0)


def test_search_spaces():
  space = search.from_flags(
    {
      "learning_rate": "0.01,0.02,0.05",
      "privacy.clip": "loguniform(0.1,10)",
    }
  )
  space.check()
  secret = randomness.new_secret()
  point = space.point(secret, 3)
  assert point == space.point(secret, 3)
  assert point["learning_rate"] in (0.01, 0.02, 0.05)
  assert 0.1 <= point["privacy.clip"] <= 10
  with pytest.raises(ValueError, match="single point"):
    search.from_flags({"learning_rate": "0.01"}).check()
  with pytest.raises(ValueError, match="single point"):
    search.from_flags({"learning_rate": "0.01,0.01", "momentum": "0.9"}).check()
  with pytest.raises(ValueError, match="cannot be searched"):
    search.from_flags({"num_steps": "10,20"})
  with pytest.raises(ValueError, match="cannot be searched"):
    search.from_flags({"privacy.num_queries": "1,2"})


def test_search_file(tmp_path):
  path = tmp_path / "s.py"
  path.write_text(
    "def get_search():\n  return {'learning_rate': [0.01, 0.1], "
    "'momentum': 'uniform(0, 0.9)'}\n"
  )
  space = search.from_file(str(path))
  assert [a.kind for a in space.axes] == ["choice", "uniform"]
  assert tune.split_search(["x", "--search.momentum=0,0.9", "--a=1"]) == [
    "x",
    "--a=1",
  ]
  assert tune._SEARCH == {"momentum": "0,0.9"}


def test_secret_material_is_private(tmp_path):
  store.load_or_create_secret(str(tmp_path), None)
  store.save_state(str(tmp_path), {"trials": {}})
  secret_dir = tmp_path / store.SECRET_DIR
  assert os.stat(secret_dir).st_mode & 0o777 == 0o700
  for name in ("tuning_secret", "state.json"):
    assert os.stat(secret_dir / name).st_mode & 0o777 == 0o600


def test_an_unreachable_total_is_refused():
  """The score's own noise (0.2 examples) costs more than epsilon 1."""
  with pytest.raises(ValueError, match="No per-trial noise"):
    budget.calibrate_trial_noise(
      PLAN,
      num_steps=10,
      score_noise=0.2,
      count=budget.trial_count("poisson", 3.0),
      target_epsilon=1.0,
    )


def test_the_command_line_refuses_in_one_paragraph(tmp_path):
  """A refused input ends the command with status 2 and one paragraph,
  no traceback (--debug shows it)."""
  command = [
    sys.executable,
    "-m",
    "experiments.tune",
    "--config",
    "configs/default.py",
    "--search.learning_rate=0.05,0.1",
    "--mean_trials=0.5",
    f"--config.workdir={tmp_path}",
  ]
  root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
  out = subprocess.run(command, cwd=root, capture_output=True, text=True)
  assert out.returncode == 2
  assert "must be at least 1" in out.stderr
  assert "Traceback" not in out.stderr
