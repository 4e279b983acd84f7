"""End-to-end tunings on digits: the released files do not depend on the
secret trial count, the total epsilon agrees with a hand computation, and a restarted
tuning reruns nothing."""

import json
import math
import os

import pytest
import tuning_reference

from configs import default
from experiments import tune
from experiments.run import train
from experiments.tuning import budget, search, store

pytestmark = pytest.mark.slow

PLAN = tuning_reference.plan()


def _config(workdir):
  config = default.get_config()
  config.model = "mlp"
  config.model_kwargs = {"hidden": (16,)}
  config.num_steps = 30
  config.eval_every = 0
  config.checkpoint_every = 0
  config.workdir = str(workdir)
  return config


def _released(workdir):
  out = {}
  for root, dirs, files in os.walk(workdir):
    dirs[:] = [d for d in dirs if d != store.SECRET_DIR]
    for name in files:
      path = os.path.join(root, name)
      out[os.path.relpath(path, workdir)] = open(path, "rb").read()
  return out


def _independent_total(result):
  """The hand computation of tuning_reference, from the released plan."""
  plan = result["per_trial_plan"]
  return tuning_reference.total_epsilon(
    plan["expected_batch_size"] / plan["dataset_size"],
    plan["noise_multiplier"],
    result["per_trial_num_steps"],
    result["score_noise"],
    3.0,
    math.inf,
    result["delta"],
  )


def test_released_files_do_not_depend_on_the_trial_count(tmp_path, monkeypatch):
  space = search.from_flags({"learning_rate": "0.01,0.02,0.05"})
  count = budget.trial_count("poisson", 3.0)
  runs = {}
  for k in (1, 4):
    monkeypatch.setattr(budget, "draw_trial_count", lambda s, c, k=k: k)
    workdir = tmp_path / f"k{k}"
    result = tune.tune(_config(workdir), space, count)
    runs[k] = (result, _released(workdir))
    secret_dir = workdir / store.SECRET_DIR
    assert os.stat(secret_dir).st_mode & 0o777 == 0o700
    assert len(os.listdir(secret_dir / "trials")) == k  # K lives only here
  (r1, files1), (r4, files4) = runs[1], runs[4]
  assert (
    sorted(files1)
    == sorted(files4)
    == [
      "config.json",
      "model.msgpack",
      "result.json",
    ]
  )
  assert files1["config.json"] == files4["config.json"]
  on_disk = json.loads(files4["result.json"])
  for result in (r1, r4, on_disk):
    assert set(result) == set(r1)
    assert result["trial_count"] == "secret (never released)"
    assert set(result["released"]) == {
      "hyperparameters",
      "noisy_validation_correct",
      "noisy_validation_accuracy",
      "test_accuracy",
      "model",
    }
  drop = lambda r: {k: v for k, v in r.items() if k != "released"}
  assert drop(r1) == drop(r4)  # all but the selected trial: K-free
  # The trials add exact discrete noise, and the total agrees with the
  # hand computation at integer orders.
  assert on_disk["per_trial_plan"]["mechanism"] == "discrete_gaussian"
  assert on_disk["per_trial_noise"] == "exact discrete Gaussian"
  assert "exact integer noise" in on_disk["per_trial_privacy"]
  assert on_disk["total_epsilon"] == pytest.approx(
    _independent_total(on_disk), rel=1e-9
  )
  assert "exact discrete Gaussian noise" in tune.format_report(on_disk)
  assert on_disk["total_epsilon"] <= 2.0
  assert on_disk["per_trial_epsilon"] < on_disk["total_epsilon"]

  # A restarted tuning reruns no trial and releases the same result.
  def no_training(*args, **kwargs):
    raise AssertionError("a finished trial was run again")

  monkeypatch.setattr(train, "train", no_training)
  again = tune.tune(_config(tmp_path / "k4"), space, count)
  assert again == r4


def test_bad_input_is_refused_before_any_trial(tmp_path, monkeypatch):
  def no_training(*args, **kwargs):
    raise AssertionError("a trial ran")

  monkeypatch.setattr(train, "train", no_training)
  config = _config(tmp_path / "w")
  count = budget.trial_count("poisson", 3.0)
  two = search.from_flags({"learning_rate": "0.01,0.02"})
  with pytest.raises(ValueError, match="single point"):
    tune.tune(config, search.from_flags({"learning_rate": "0.01"}), count)
  # A per-trial target whose total (mean 3) exceeds the total of 2.
  with pytest.raises(ValueError, match="over the budget"):
    tune.tune(config, two, count, trial_epsilon=1.5)
  config.epsilon_budget = 1.0  # the budget caps the total below the target
  with pytest.raises(ValueError, match="over the budget"):
    tune.tune(config, two, count, trial_epsilon=0.9)
  assert not os.path.exists(tmp_path / "w" / store.SECRET_DIR)


def _event_total(sigma, p, steps, score_noise, mean, shape, delta):
  return tuning_reference.total_epsilon(
    p, sigma, steps, score_noise, mean, shape, delta
  )


def test_calibrated_total_meets_the_target_and_no_more():
  count = budget.trial_count("poisson", 3.0)
  sigma = budget.calibrate_trial_noise(
    PLAN, num_steps=400, score_noise=5.0, count=count, target_epsilon=2.0
  )
  ours = budget.total_epsilon(
    budget.trial_event(
      budget.step_rdp_event(PLAN.with_noise_multiplier(sigma)), 400, 5.0
    ),
    count,
    delta=1e-5,
  )
  theirs = _event_total(sigma, 64 / 1150, 400, 5.0, 3.0, math.inf, 1e-5)
  assert ours == pytest.approx(theirs, rel=1e-9)
  assert 2.0 * (1 - 1e-4) < theirs <= 2.0 * (1 + 1e-9)
  # Just below the calibrated multiplier, the total is over the target.
  assert (
    _event_total(sigma * 0.999, 64 / 1150, 400, 5.0, 3.0, math.inf, 1e-5) > 2.0
  )
  # Tuning costs more than one run at the same noise.
  assert PLAN.with_noise_multiplier(sigma).epsilon(400) < 0.75 * theirs


class _Crash(Exception):
  pass


def test_an_interrupted_tuning_resumes_with_the_same_trials(
  tmp_path, monkeypatch
):
  monkeypatch.setattr(budget, "draw_trial_count", lambda s, c: 3)
  space = search.from_flags({"learning_rate": "0.01,0.02,0.05"})
  count = budget.trial_count("poisson", 3.0)
  real, calls, crash = train.train, [], [True]

  def crash_at_the_second_trial(config, **kwargs):
    calls.append((config.workdir, config.learning_rate))
    if crash[0] and len(calls) == 2:
      raise _Crash
    return real(config, **kwargs)

  monkeypatch.setattr(train, "train", crash_at_the_second_trial)
  with pytest.raises(_Crash):
    tune.tune(_config(tmp_path / "w"), space, count)
  secret = (tmp_path / "w" / store.SECRET_DIR / "tuning_secret").read_bytes()
  first = list(calls)
  calls.clear()
  crash[0] = False
  result = tune.tune(_config(tmp_path / "w"), space, count)
  # The same secret; trial 0 is not run again; trial 1 reruns at its point.
  assert (
    tmp_path / "w" / store.SECRET_DIR / "tuning_secret"
  ).read_bytes() == secret
  workdir = str(tmp_path / "w")
  assert [w for w, _ in first] == [
    store.trial_workdir(workdir, 0),
    store.trial_workdir(workdir, 1),
  ]
  assert [w for w, _ in calls] == [
    store.trial_workdir(workdir, 1),
    store.trial_workdir(workdir, 2),
  ]
  assert calls[0][1] == first[1][1]  # trial 1 at the same point
  assert len(store.load_state(str(tmp_path / "w"))["trials"]) == 3
  assert result["released"] is not None
