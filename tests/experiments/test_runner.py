"""The experiment runner: resume, ledger budget, corrupt checkpoints, bad configs."""

import glob
import json
import os

import config_overrides
import pytest

from configs import default
from experiments import tasks
from experiments.run import checkpointing, preflight, train
from zoprivacy import privacy


def _small_config(workdir, **overrides):
  c = default.get_config()
  c.num_steps = 300
  c.eval_every = 100
  c.checkpoint_every = 100
  c.workdir = str(workdir)
  return config_overrides.apply(c, overrides)


@pytest.mark.integration
def test_resume_ends_exactly_where_an_uninterrupted_run_does(tmp_path):
  # Reproducible test noise, so that two separate runs can be compared.
  test = dict(insecure_test_noise=True)
  full = train.train(_small_config(tmp_path / "full", **test), progress=False)
  part = train.train(
    _small_config(tmp_path / "resumed", **test),
    progress=False,
    stop_after=150,
  )
  assert part["interrupted_at"] == 150
  resumed = train.train(
    _small_config(tmp_path / "resumed", **test), progress=False
  )
  assert resumed["params_sha256"] == full["params_sha256"]
  assert resumed["epsilon"] == full["epsilon"]
  assert resumed["test_accuracy"] == full["test_accuracy"]
  ledger = privacy.PrivacyLedger.load(
    tmp_path / "resumed" / "privacy_ledger.json"
  )
  assert ledger.num_steps == 300
  rows = [json.loads(l) for l in open(tmp_path / "resumed" / "metrics.jsonl")]
  assert [r["step"] for r in rows] == [0, 100, 200, 300]
  assert (tmp_path / "resumed" / "report.png").stat().st_size > 1000


def test_budget_refuses_the_step_that_would_exceed_it(tmp_path):
  # A set multiplier (no target): the ledger finds that 300 steps at sigma
  # 0.8 spend more than epsilon 1.
  c = _small_config(
    tmp_path, epsilon_budget=1.0, target_epsilon=None, noise_multiplier=0.8
  )
  with pytest.raises(privacy.PrivacyBudgetExceededError, match="budget"):
    train.train(c, progress=False)


def test_a_target_above_the_budget_is_refused_before_anything_runs(tmp_path):
  c = _small_config(tmp_path, epsilon_budget=1.0)  # calibrated for epsilon 2
  with pytest.raises(preflight.BudgetBelowTargetError, match="at most 1"):
    train.train(c, progress=False)
  assert not (tmp_path / "privacy_ledger.json").exists()


def test_corrupt_checkpoint_is_reported(tmp_path):
  train.train(
    _small_config(tmp_path, num_steps=200), progress=False, stop_after=100
  )
  data_files = [
    f
    for f in glob.glob(
      str(tmp_path / "checkpoints" / "100" / "state" / "**"),
      recursive=True,
    )
    if os.path.isfile(f) and "/d/" in f
  ]
  assert data_files
  for f in data_files:
    with open(f, "r+b") as fh:
      raw = bytearray(fh.read())
      for i in range(0, len(raw), 7):
        raw[i] ^= 0xFF
      fh.seek(0)
      fh.write(raw)
  with pytest.raises(checkpointing.CorruptCheckpointError):
    train.train(_small_config(tmp_path, num_steps=200), progress=False)


def test_shuffling_is_rejected_for_private_estimators(tmp_path):
  c = _small_config(tmp_path, sampling="shuffle")
  with pytest.raises(ValueError, match="Poisson"):
    train.train(c, progress=False)


def test_tampered_ledger_in_checkpoint_is_reported(tmp_path):
  train.train(
    _small_config(tmp_path, num_steps=200), progress=False, stop_after=100
  )
  path = tmp_path / "checkpoints" / "100" / "manifest" / "metadata"
  manifest = json.loads(path.read_text())
  manifest["ledger"]["segments"][0]["num_steps"] = 10  # under-report spending
  path.write_text(json.dumps(manifest))
  with pytest.raises(checkpointing.CorruptCheckpointError, match="ledger"):
    train.train(_small_config(tmp_path, num_steps=200), progress=False)


def test_poisson_from_a_loader_that_cannot_provide_it_is_rejected(
  tmp_path, monkeypatch
):
  digits = tasks.TASKS["digits"]

  def streamed_digits(config):
    task = digits(config)
    task.sampling_schemes = ("shuffle",)
    return task

  monkeypatch.setitem(tasks.TASKS, "streamed_digits", streamed_digits)
  c = _small_config(tmp_path, dataset="streamed_digits")
  with pytest.raises(ValueError, match="can only provide"):
    train.train(c, progress=False)
