"""SIGKILL at a random step, then the same command again.

``python -m experiments.run`` runs in a subprocess and is killed once its
metrics show step ``k``. After a checkpoint: the resumed run ends with the
same parameters and metrics as an uninterrupted one (timing and epsilon
columns aside). Before any checkpoint: the rerun replays from step 0 with
the stored secret (same parameters as an uninterrupted run), and the final
ledger counts every release computed by both processes.
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


def test_sigkill_after_a_checkpoint_then_resume_matches(tmp_path):
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
  assert resumed.params_sha256 == full.params_sha256
  assert _without_epsilon(resumed) == _without_epsilon(full)
  # The steps after the restored checkpoint ran twice: charged twice.
  assert _ledger_steps(killed) == after_kill + STEPS - restart >= STEPS


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
  # Same stored secret: the replay from step 0 is the uninterrupted run.
  assert resumed.params_sha256 == full.params_sha256
  assert _without_epsilon(resumed) == _without_epsilon(full)
  final = _ledger_steps(killed)
  assert final == after_kill + STEPS >= computed + STEPS, (kill_step, final)
