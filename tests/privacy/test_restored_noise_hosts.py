"""A default state on several hosts: one noise, and no replay after a restore.

A library user on two processes makes a state eagerly on each (so each
holds its own random handle) and steps it under ``jax.jit`` on a mesh over
every process's devices. The session key's lookup runs once per step, on
the computation's first device, and XLA hands its key to every device: both
processes hold the same releases. A state saved by another process (this
one, after one step) and restored in the job draws fresh noise there too.
"""

import json
import os
import pickle
import socket
import subprocess
import sys

import numpy as np
import pytest
import restore_worker as rw

import zoprivacy

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _job(tmp_path, saved) -> list[dict]:
  port, procs = _free_port(), []
  env = dict(os.environ, PYTHONPATH=f"{ROOT}:{HERE}", JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)
  for pid in (0, 1):
    out = str(tmp_path / f"out{pid}.json")
    args = [os.path.join(HERE, "hosts_worker.py"), str(pid), str(port)]
    procs.append(
      (
        subprocess.Popen(
          [sys.executable, *args, saved, out],
          env=env,
          stdout=subprocess.PIPE,
          stderr=subprocess.STDOUT,
          text=True,
        ),
        out,
      )
    )
  results = []
  for proc, out in procs:
    log, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, log[-3000:]
    with open(out) as f:
      results.append(json.load(f))
  return results


@pytest.mark.slow  # a two-process job (gloo): ~30-70 s on 2 cores
def test_two_processes_add_one_noise_and_a_restore_draws_fresh(tmp_path):
  saved = rw.STEP(
    zoprivacy.init(rw.TX, np.zeros(rw.DIM, np.float32)), rw.MASKS[0]
  )
  path = str(tmp_path / "state.pickle")
  with open(path, "wb") as f:
    pickle.dump(saved, f)
  on_d = rw.release(saved, 0)
  first, second = _job(tmp_path, path)
  assert first["fresh_handle"] != second["fresh_handle"]  # each its own
  for name in ("fresh", "restored"):
    assert first[name] == second[name], name  # one noise on both hosts
  restored = np.asarray(first["restored"][0], np.float64)
  assert np.any(on_d != restored)  # the same batch, other noise
