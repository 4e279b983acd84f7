"""SIGKILL at a step, then resume == an uninterrupted run, bit for bit.

``python -m experiments.run`` runs in a subprocess; it is killed once its
metrics show step ``k``; the resumed run must end with the same parameter
digest, ledger JSON and metrics rows (timing column aside).
"""

import os
import signal
import subprocess
import sys
import time

import pytest
from run_outputs import metrics_rows, run_outputs

# A killed run resumed, end to end (~30 s; in CI's slow step).
pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
KILL_AT = 20


def _command(workdir):
  return [
    sys.executable,
    "-m",
    "experiments.run",
    "--config",
    "configs/default.py",
    "--config.num_steps=60",
    "--config.eval_every=10",
    "--config.checkpoint_every=10",
    "--config.insecure_test_noise=True",
    "--config.test_run=True",
    f"--config.workdir={workdir}",
  ]


def _finish(workdir):
  subprocess.run(_command(workdir), cwd=ROOT, check=True, capture_output=True)
  return run_outputs(workdir)


def test_sigkill_then_resume_is_bit_identical(tmp_path):
  full = _finish(str(tmp_path / "full"))
  killed = str(tmp_path / "killed")
  proc = subprocess.Popen(
    _command(killed),
    cwd=ROOT,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )
  deadline = time.time() + 120
  while time.time() < deadline and proc.poll() is None:
    if any(r["step"] >= KILL_AT for r in metrics_rows(killed)):
      break
    time.sleep(0.01)
  assert proc.poll() is None, "the run ended before it could be killed"
  os.kill(proc.pid, signal.SIGKILL)
  proc.wait()
  assert not os.path.exists(os.path.join(killed, "result.json"))
  resumed = _finish(killed)
  assert resumed.ledger is not None
  assert resumed == full
