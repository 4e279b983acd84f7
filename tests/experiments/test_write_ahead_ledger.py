"""The write-ahead privacy ledger: no computed release is ever unrecorded.

Before the first private step the run's secret (0600 in a 0700 folder,
whatever the umask) and the ledger are on disk; each step is in the ledger
file before its release is computed; a crash at any step (here a full disk)
followed by a rerun of the same config ends with a ledger that counts every
release computed by either run (replays are charged again); a workdir whose
checkpoint is ahead of its ledger, or whose ledger lost its secret, is
refused; ``--resume=force`` past the target warns and reports both numbers.
"""

import errno
import json
import os
import stat

import config_overrides
import jax.numpy as jnp
import numpy as np
import pytest

from configs import default
from experiments.run import checkpointing, loop, report, run_ledger, train
from zoprivacy.privacy.ledger import PrivacyLedger


def _config(workdir, **overrides):
  c = default.get_config()
  c.num_steps = 40
  c.eval_every = 10
  c.checkpoint_every = 1000  # no checkpoint before the end
  c.workdir = str(workdir)
  return config_overrides.apply(c, overrides)


def _ledger_steps(workdir) -> int:
  return PrivacyLedger.load(
    os.path.join(workdir, "privacy_ledger.json")
  ).num_steps


def _mode(path) -> int:
  return stat.S_IMODE(os.stat(path).st_mode)


def _count_releases(monkeypatch, calls, before=None):
  """Wraps the loop's jitted step: ``calls`` gets one entry per release
  computed; ``before(t)`` runs just before it."""
  real = loop.make_step

  def counting(run):
    step = real(run)

    def wrapped(*args):
      if before is not None:
        before(len(calls))
      calls.append(1)
      return step(*args)

    return wrapped

  monkeypatch.setattr(loop, "make_step", counting)


@pytest.mark.slow  # a few trainings, 5-25 s
def test_secret_and_ledger_are_on_disk_before_each_release(
  tmp_path, monkeypatch
):
  old = os.umask(0o022)
  try:
    seen = []

    def before(t):  # the ledger already counts step t when it is computed
      seen.append(_ledger_steps(tmp_path))
      assert seen[-1] >= t + 1, (t, seen[-1])
      secret = tmp_path / run_ledger.PRIVATE_DIR / run_ledger.SECRET_FILE
      assert secret.stat().st_size == 32
      assert _mode(secret) == 0o600 and _mode(secret.parent) == 0o700

    _count_releases(monkeypatch, [], before)
    c = _config(tmp_path, num_steps=25, checkpoint_every=10)
    train.train(c, progress=False)
  finally:
    os.umask(old)
  assert len(seen) == 25 and _ledger_steps(tmp_path) == 25
  for root, dirs, files in os.walk(tmp_path / "checkpoints"):
    assert all(_mode(os.path.join(root, d)) == 0o700 for d in dirs)
    assert all(_mode(os.path.join(root, f)) == 0o600 for f in files)
  assert _mode(tmp_path / "checkpoints") == 0o700


@pytest.mark.slow  # a few trainings, 5-25 s
@pytest.mark.parametrize("checkpoint_every", [1000, 10])
def test_a_full_disk_at_a_random_step_then_a_rerun_counts_every_release(
  tmp_path, monkeypatch, checkpoint_every
):
  """ENOSPC in the ledger's write at a random point, with or without a
  checkpoint before it; the rerun of the same config replays from the same
  secret and the final ledger counts every release of both runs."""
  fail_at = int(np.random.default_rng(checkpoint_every).integers(4, 9))
  real_save, saves = PrivacyLedger.save, []

  def full_disk(self, path):
    saves.append(1)
    if len(saves) == fail_at:
      raise OSError(errno.ENOSPC, "No space left on device", str(path))
    real_save(self, path)

  calls = []
  _count_releases(monkeypatch, calls)
  monkeypatch.setattr(PrivacyLedger, "save", full_disk)
  c = _config(tmp_path, checkpoint_every=checkpoint_every)
  with pytest.raises(OSError) as info:
    train.train(c, progress=False)
  assert info.value.errno == errno.ENOSPC
  first_run = len(calls)
  after_crash = _ledger_steps(tmp_path)
  assert 0 < first_run <= after_crash
  ckpts = [int(d) for d in os.listdir(tmp_path / "checkpoints") if d.isdigit()]
  restart = max(ckpts, default=0)
  assert restart < first_run
  result = train.train(_config(tmp_path, checkpoint_every=checkpoint_every))
  assert len(calls) - first_run == 40 - restart  # the replayed steps ran
  final = _ledger_steps(tmp_path)
  assert final >= len(calls)  # every computed release is counted
  assert final == after_crash + 40 - restart  # replays charged again
  assert result["ledger"]["num_steps"] == final
  rows = [json.loads(x) for x in open(tmp_path / "metrics.jsonl")]
  assert [r["step"] for r in rows] == [0, 10, 20, 30, 40]
  assert rows[-1]["epsilon"] == result["epsilon"]


def test_a_checkpoint_ahead_of_the_ledger_is_refused_with_both_numbers(
  tmp_path,
):
  c = _config(tmp_path, checkpoint_every=10)
  train.train(c, progress=False, stop_after=20)
  ledger = PrivacyLedger.load(tmp_path / "privacy_ledger.json")
  short = PrivacyLedger(delta=ledger.delta)
  short.record(ledger.plans[0], 10)
  short.save(tmp_path / "privacy_ledger.json")
  with pytest.raises(run_ledger.LedgerStateError, match="20 private.*only 10"):
    train.train(c, progress=False)


def test_a_ledger_without_its_secret_is_never_given_a_fresh_one(tmp_path):
  c = _config(tmp_path)
  train.train(c, progress=False, stop_after=5)
  os.remove(tmp_path / run_ledger.PRIVATE_DIR / run_ledger.SECRET_FILE)
  with pytest.raises(run_ledger.LedgerStateError, match="no run secret"):
    train.train(c, progress=False)
  assert _ledger_steps(tmp_path) == 5


@pytest.mark.slow  # a few trainings, 5-25 s
def test_resume_force_past_the_target_warns_and_reports_both(tmp_path, capsys):
  c = _config(tmp_path, num_steps=20, eval_every=0)
  first = train.train(c, progress=False)
  assert 1.98 < first["epsilon"] <= 2.0 and "warning" not in first
  c = _config(tmp_path, num_steps=30, eval_every=0, resume="force")
  result = train.train(c, progress=False)
  assert "resumed from step 20" in capsys.readouterr().out
  saved = json.load(open(tmp_path / "result.json"))
  assert saved["target_epsilon"] == 2.0 and saved["epsilon"] > 2.01
  assert "exceeds the planned target 2" in saved["warning"]
  assert result["ledger"]["num_steps"] == 30
  # What the command line prints (experiments/run/cli.py prints this report).
  text = report.format_report(result)
  assert "WARNING: epsilon" in text and "exceeds the planned target 2" in text
  assert (
    f"planned target epsilon 2; actual epsilon {result['epsilon']:.4f}"
    in (text)
  )


@pytest.mark.slow  # a few trainings, 5-25 s
def test_the_seconds_column_continues_after_a_resume(tmp_path):
  c = _config(tmp_path, checkpoint_every=10)
  train.train(c, progress=False, stop_after=20)
  rows = [json.loads(x) for x in open(tmp_path / "metrics.jsonl")]
  train.train(c, progress=False)
  after = [json.loads(x) for x in open(tmp_path / "metrics.jsonl")]
  assert after[:3] == rows[:3]
  seconds = [r["seconds"] for r in after]
  assert seconds == sorted(seconds) and seconds[3] > rows[2]["seconds"]


def test_checkpoints_are_owner_only_under_umask_022(tmp_path):
  old = os.umask(0o022)
  try:
    ckpt = checkpointing.Checkpointer(str(tmp_path / "ckpt"))
    ckpt.save(1, {"w": jnp.ones(3)}, None)
    ckpt.close()
  finally:
    os.umask(old)
  paths = [tmp_path / "ckpt"]
  for root, dirs, files in os.walk(tmp_path / "ckpt"):
    paths += [os.path.join(root, n) for n in dirs + files]
  assert len(paths) > 3
  for p in paths:
    assert _mode(p) == (0o700 if os.path.isdir(p) else 0o600), p


@pytest.mark.slow  # three short trainings
def test_a_budget_that_fits_the_run_also_fits_its_resume(tmp_path):
  c = _config(
    tmp_path / "full", num_steps=20, eval_every=0, target_epsilon=None
  )
  c.privacy.noise_multiplier = 2.0
  spent = train.train(c, progress=False)["epsilon"]
  c.workdir = str(tmp_path / "resumed")
  c.epsilon_budget = spent * (1 + 1e-9)
  train.train(c, progress=False, stop_after=10)
  result = train.train(c, progress=False)  # 10 spent + 10 left: fits
  assert result["num_steps"] == 20 and result["epsilon"] <= c.epsilon_budget
