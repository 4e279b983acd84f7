"""SIGKILL at a random step, then the same command again.

``python -m experiments.run`` runs in a subprocess and is killed once its
metrics show step ``k``. The rerun resumes from the latest checkpoint (or
step 0). The steps the killed run had reserved beyond it may have been
computed, so they are computed again with fresh randomness (noise and
batch of attempt 1), never with the noise they may already have released:
the resumed trajectory equals the uninterrupted one up to the checkpoint
and differs from it from there. The final ledger counts every release
computed by both processes, the replays charged again.
"""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from run_outputs import metrics_rows, run_outputs

from zoprivacy.privacy.ledger import PrivacyLedger

# Killed runs resumed, end to end (~30 s each; in CI's slow step).
pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
STEPS = 60


def _command(workdir, eval_every=10, checkpoint_every=10):
  return [
    sys.executable,
    "-m",
    "experiments.run",
    "--config",
    "configs/default.py",
    f"--config.num_steps={STEPS}",
    f"--config.eval_every={eval_every}",
    f"--config.checkpoint_every={checkpoint_every}",
    "--config.insecure_test_noise=True",
    "--config.test_run=True",
    f"--config.workdir={workdir}",
  ]


def _finish(command):
  subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
  return run_outputs(command[-1].split("=", 1)[1])


def _kill_at(command, workdir, step) -> int:
  """Runs ``command``, SIGKILLs it once its metrics reach ``step``; returns
  the last step its metrics show (a release computed before the kill)."""
  proc = subprocess.Popen(
    command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
  )
  deadline = time.time() + 120
  while time.time() < deadline and proc.poll() is None:
    if any(r["step"] >= step for r in metrics_rows(workdir)):
      break
    time.sleep(0.005)
  assert proc.poll() is None, "the run ended before it could be killed"
  os.kill(proc.pid, signal.SIGKILL)
  proc.wait()
  assert not os.path.exists(os.path.join(workdir, "result.json"))
  return max(r["step"] for r in metrics_rows(workdir))


def _ledger_steps(workdir) -> int:
  path = os.path.join(workdir, "privacy_ledger.json")
  return PrivacyLedger.load(path).num_steps


def _without_epsilon(outputs):
  return [
    {k: v for k, v in r.items() if k != "epsilon"} for r in outputs.metrics
  ]


def _check_replay(full, resumed, killed, restart, after_kill):
  """The rows up to ``restart`` equal the uninterrupted run's; from it on,
  with steps to replay, the trajectories differ (fresh randomness)."""
  ledger = PrivacyLedger.load(os.path.join(killed, "privacy_ledger.json"))
  upto = lambda rows: [r for r in rows if r["step"] <= restart]
  assert upto(_without_epsilon(resumed)) == upto(_without_epsilon(full))
  if after_kill > restart:  # steps restart..after_kill - 1 replayed
    assert ledger.ranges == ((0, after_kill), (restart, STEPS))
    assert resumed.params_sha256 != full.params_sha256
    later = lambda rows: [r for r in rows if r["step"] > restart]
    assert later(_without_epsilon(resumed)) != later(_without_epsilon(full))
  else:  # killed before reserving past the checkpoint: nothing replayed
    assert ledger.ranges == ((0, STEPS),)
    assert resumed.params_sha256 == full.params_sha256
  # Every release of both processes is charged, the replays again.
  assert ledger.num_steps == after_kill + STEPS - restart


def test_sigkill_after_a_checkpoint_then_resume_draws_fresh_randomness(
  tmp_path,
):
  full = _finish(_command(tmp_path / "full"))
  killed = str(tmp_path / "killed")
  computed = _kill_at(_command(killed), killed, 20)
  after_kill = _ledger_steps(killed)
  assert after_kill >= computed
  restart = max(
    int(d)
    for d in os.listdir(os.path.join(killed, "checkpoints"))
    if d.isdigit()
  )
  resumed = _finish(_command(killed))
  _check_replay(full, resumed, killed, restart, after_kill)
  assert _ledger_steps(killed) >= computed + STEPS - restart >= STEPS


def test_sigkill_before_the_first_checkpoint_counts_every_release(tmp_path):
  kill_step = int(np.random.default_rng().integers(5, 40))
  command = lambda w: _command(w, eval_every=5, checkpoint_every=1000)
  full = _finish(command(tmp_path / "full"))
  killed = str(tmp_path / "killed")
  computed = _kill_at(command(killed), killed, kill_step)
  after_kill = _ledger_steps(killed)
  assert after_kill >= computed >= kill_step  # written ahead of the releases
  assert not os.path.exists(os.path.join(killed, "checkpoints", "1000"))
  resumed = _finish(command(killed))
  # From step 0 again: every step the killed run reserved is recomputed
  # with fresh randomness, so the runs part from the first step.
  _check_replay(full, resumed, killed, 0, after_kill)
  final = _ledger_steps(killed)
  assert final == after_kill + STEPS >= computed + STEPS, (kill_step, final)
