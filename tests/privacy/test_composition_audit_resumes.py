"""Composition audit, resumes under other settings: every epsilon a report
says applies is at least the composition of what actually ran.

What ran is recorded here, outside the code under test: each computed step
(wrapping the loop's step) with the settings of the launch that computed
it. The composition is then computed by hand from those records and the
papers' formulas, not from the ledger:

* a Noisy-ZOGD run, finished, its last checkpoint lost, forced to resume
  under another noise: each step is one replace-one Gaussian release of
  the ``K`` clipped sums, of sensitivity ``mu_t = 2 Delta / (n sqrt(K) s_t)``
  in units of its noise std ``s_t = sigma_t sqrt(beta / K + (1 - beta) /
  d)`` (Chien, Chen & Li, Thm 3.1 / App. A.4); the steps compose to one
  Gaussian of ``mu = sqrt(sum mu_t^2)``, whose exact epsilon (Balle and
  Wang 2018) the headline and any final-iterate figure printed as applying
  must reach;
* a tuning whose first trial was killed and rerun, then taken over by a
  ``--resume=force`` with another mean number of trials: the takeover is
  refused, and the total epsilon reaches the hand computation of
  ``tuning_reference`` at the most steps a trial computed.
"""

import importlib.util
import math
import os
import shutil

import pytest
from scipy import optimize, stats

from configs import hidden_state_digits_logreg
from experiments import tune
from experiments.run import loop, report, train
from experiments.tuning import budget, record, search, store

DELTA = 1e-5
_REFERENCE = os.path.join(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
  "experiments",
  "tuning_reference.py",
)


def _tuning_reference():
  """The tuner tests' hand computation (``tests/experiments``)."""
  spec = importlib.util.spec_from_file_location("tuning_reference", _REFERENCE)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


tuning_reference = _tuning_reference()


def _record_steps(monkeypatch, sink, stop=None):
  """Each computed step hands ``sink`` its run; ``stop(run, t)`` may raise
  before step ``t`` is computed (a kill)."""
  real = loop.Loop._one_step

  def one_step(self, step, t, last):
    if stop is not None:
      stop(self.run, t)
    params = real(self, step, t, last)
    sink(self.run, t)
    return params

  monkeypatch.setattr(loop.Loop, "_one_step", one_step)


def gaussian_epsilon(mu: float, delta: float) -> float:
  """The exact epsilon of a Gaussian mechanism of sensitivity ``mu`` (in
  noise stds) at ``delta`` (Balle and Wang 2018, Thm 8)."""

  def gap(eps):
    return (
      stats.norm.cdf(-eps / mu + mu / 2)
      - math.exp(eps + stats.norm.logcdf(-eps / mu - mu / 2))
      - delta
    )

  return optimize.brentq(gap, 0.0, 1e3, xtol=1e-12)


def _hidden_config(workdir, **kwargs):
  config = hidden_state_digits_logreg.get_config()
  config.update(num_steps=8, checkpoint_every=4, workdir=str(workdir))
  config.estimator_kwargs.update(
    {"num_directions": 20, "noise_std": 0.05, **kwargs}
  )
  return config


def _step_mu(config, dataset_size: int, dimension: int = 650) -> float:
  kw = config.estimator_kwargs
  k, beta = kw.num_directions, kw.directional_fraction
  std = kw.noise_std * math.sqrt(beta / k + (1 - beta) / dimension)
  return 2 * config.privacy.clip / (dataset_size * math.sqrt(k) * std)


@pytest.mark.slow  # two launches of an 8-step Noisy-ZOGD run (~30 s)
def test_hidden_state_forced_resume_with_another_noise(tmp_path, monkeypatch):
  ran = []
  _record_steps(
    monkeypatch, lambda run, t: ran.append((t, run.settings.task_config()))
  )
  train.train(_hidden_config(tmp_path), progress=False)
  shutil.rmtree(tmp_path / "checkpoints" / "8")
  forced = _hidden_config(tmp_path, noise_std=0.5)
  forced.resume = "force"
  result = train.train(forced, progress=False)
  assert [t for t, _ in ran] == [*range(8), *range(4, 8)]
  n = result["privacy_plan"]["dataset_size"]
  mu = math.sqrt(sum(_step_mu(c, n) ** 2 for _, c in ran))
  composition = gaussian_epsilon(mu, DELTA)
  applies = [result["epsilon"]]
  block = result["final_iterate"]
  if "refused" not in block:
    applies += [block[k]["improved"] for k in block if k.endswith("epsilon")]
  assert min(applies) >= composition * (1 - 1e-6), (applies, composition)
  assert "hidden state (Thm 3.2)" not in report.format_report(result)


class _Killed(BaseException):
  pass


@pytest.mark.slow  # three 30-step trials of a small MLP in process (~40 s)
def test_tuner_rerun_with_other_settings(tmp_path, monkeypatch):
  monkeypatch.setattr(budget, "draw_trial_count", lambda s, c: 2)
  ran, killed = [], []

  def kill_trial_0_at_step_10(run, t):
    if t == 10 and run.workdir.endswith("0000") and not killed:
      killed.append(t)
      raise _Killed

  _record_steps(
    monkeypatch,
    lambda run, t: ran.append((run.workdir, run.plan.noise_multiplier)),
    kill_trial_0_at_step_10,
  )
  space = search.from_flags({"learning_rate": "0.01,0.02"})
  mean_two = budget.trial_count("poisson", 2.0)
  with pytest.raises(_Killed):
    tune.tune(tuning_reference.small_config(tmp_path), space, mean_two)
  tune.tune(
    tuning_reference.small_config(tmp_path), space, mean_two
  )  # the same command
  with open(tmp_path / "result.json") as f:
    released = f.read()
  computed = len(ran)
  forced = tuning_reference.small_config(tmp_path, resume="force")
  with pytest.raises(record.TuningMismatchError, match="--resume=force"):
    tune.tune(forced, space, budget.trial_count("poisson", 4.0))
  assert len(ran) == computed  # no trial of the other settings ran
  with open(tmp_path / "result.json") as f:
    assert f.read() == released
  result = tune.tune(tuning_reference.small_config(tmp_path), space, mean_two)
  # What ran: trial 0 computed 10 + 30 steps, trial 1 30, all at one noise.
  per_trial = {}
  for workdir, _ in ran:
    per_trial[workdir] = per_trial.get(workdir, 0) + 1
  assert sorted(per_trial.values()) == [30, 40]
  assert sorted(per_trial) == [
    store.trial_workdir(str(tmp_path), i) for i in (0, 1)
  ]
  (sigma,) = {m for _, m in ran}
  plan = result["per_trial_plan"]
  hand = lambda steps: tuning_reference.total_epsilon(
    plan["expected_batch_size"] / plan["dataset_size"],
    sigma,
    steps,
    result["score_noise"],
    2.0,
    math.inf,
    result["delta"],
  )
  composition = hand(max(per_trial.values()))
  assert composition > hand(30) * 1.01  # the flags' 30 steps under-count
  assert result["total_epsilon"] >= composition * (1 - 1e-9)
  assert "WARNING" in tune.format_report(result)
  assert os.path.exists(tmp_path / "model.msgpack")
