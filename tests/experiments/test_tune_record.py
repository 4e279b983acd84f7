"""A tuning workdir belongs to one tuning, and its total epsilon counts
every trial as its ledger records it (no training here: the trial count
is fixed at zero, or the trials' ledgers are written by hand)."""

import os

import pytest
import tuning_reference

from experiments import tune
from experiments.run import train
from experiments.tuning import budget, record, search, store
from zoprivacy.privacy.ledger import PrivacyLedger

PLAN = tuning_reference.plan().with_noise_multiplier(3.0)
SPACE = search.from_flags({"learning_rate": "0.01,0.02"})


@pytest.fixture
def no_trials(monkeypatch):
  """The secret count draws no trial, no trial may train, and the
  per-trial noise is set (the calibration is tested elsewhere)."""

  def no_training(*args, **kwargs):
    raise AssertionError("a trial ran")

  monkeypatch.setattr(budget, "draw_trial_count", lambda s, c: 0)
  monkeypatch.setattr(train, "train", no_training)
  monkeypatch.setattr(budget, "calibrate_trial_noise", lambda *a, **k: 3.0)


def test_a_forced_rerun_with_other_settings_is_refused(tmp_path, no_trials):
  """The reproduction's second command (mean 4, --resume=force, on the
  workdir of a mean-2 tuning) is refused before any trial runs."""
  first = tune.tune(
    tuning_reference.small_config(tmp_path),
    SPACE,
    budget.trial_count("poisson", 2),
  )
  assert first["released"] is None
  state = store.load_state(str(tmp_path))
  forced = tuning_reference.small_config(tmp_path, resume="force")
  with pytest.raises(record.TuningMismatchError) as refused:
    tune.tune(forced, SPACE, budget.trial_count("poisson", 4))
  message = str(refused.value)
  assert "['poisson', 2.0, 'inf'] -> ['poisson', 4.0, 'inf']" in message
  assert "--resume=force either" in message and "\n" not in message
  assert store.load_state(str(tmp_path)) == state
  # The same tuning resumes, forced or not.
  again = tune.tune(forced, SPACE, budget.trial_count("poisson", 2))
  assert again["total_epsilon"] == first["total_epsilon"]
  # config.json lost: the secret state still knows its tuning.
  os.remove(tmp_path / "config.json")
  with pytest.raises(record.TuningMismatchError, match="secret state"):
    tune.tune(forced, SPACE, budget.trial_count("poisson", 4))
  assert not os.path.exists(tmp_path / "config.json")  # nothing written


def _write_trial_ledger(workdir, trial, plan, steps):
  path = store.trial_workdir(str(workdir), trial)
  os.makedirs(path)
  ledger = PrivacyLedger(delta=1e-5)
  ledger.record(plan, steps)
  ledger.save(os.path.join(path, "privacy_ledger.json"))


def test_the_total_counts_the_most_steps_a_trial_recorded(tmp_path):
  """Trial 1 was killed and resumed: its ledger holds 45 steps of a 30-step
  trial, and the total charges 45 to every trial."""
  _write_trial_ledger(tmp_path, 0, PLAN, 30)
  _write_trial_ledger(tmp_path, 1, PLAN, 45)
  steps = record.recorded_steps(str(tmp_path), PLAN, 30)
  assert steps == 45
  count = budget.trial_count("poisson", 2.0)
  total = record.total(PLAN, steps, 5.0, count, target=None)["total_epsilon"]
  theirs = tuning_reference.total_epsilon(
    64 / 1150, 3.0, 45, 5.0, 2.0, count.shape, 1e-5
  )
  assert total == pytest.approx(theirs, rel=1e-9)
  nominal = record.total(PLAN, 30, 5.0, count, target=None)["total_epsilon"]
  assert total > nominal
  assert "replayed" in record.total(PLAN, 45, 5.0, count, nominal)["warning"]
  _write_trial_ledger(tmp_path, 2, PLAN.with_noise_multiplier(2.0), 30)
  with pytest.raises(record.TuningMismatchError, match="trial 2"):
    record.recorded_steps(str(tmp_path), PLAN, 30)


def test_a_second_selection_is_refused(tmp_path):
  state = {"trials": {}}
  chosen = {"trial": 1, "score": 40, "params_sha256": "ab"}
  record.record_release(str(tmp_path), state, chosen)
  record.record_release(str(tmp_path), state, dict(chosen))  # the same
  assert store.load_state(str(tmp_path))["released"] == chosen
  with pytest.raises(record.TuningMismatchError, match="second selection"):
    record.record_release(str(tmp_path), state, {**chosen, "trial": 0})
