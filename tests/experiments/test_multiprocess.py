"""Two processes on localhost through ``jax.distributed`` equal one process.

Each process has 2 simulated CPU devices (4 in all, mesh ``data=2 x
fsdp=2``: the parameters are sharded across the two processes). The
two-process run stops after 10 steps, writing a sharded orbax checkpoint
(each process its own shards), and a second launch resumes it to step 20.
The reference is one process with 4 devices running the 20 steps without
a break. Same seeds, same (insecure, test-only) noise. Each host keeps half
of the training set and fills its own block of every batch, so the batch
holds the same examples in another order; with exact noise the clipped
scalars are summed as integers, so the order cannot change the sum, and the
final parameters are bit-identical, as are the accuracy and epsilon.
"""

import json
import os
import socket
import subprocess
import sys

import pytest

from zoprivacy.estimators import registry

HERE = os.path.dirname(__file__)
WORKER = os.path.join(HERE, "multiprocess_worker.py")


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _start(tmp_path, name, num_processes, devices, stop_after, mode=()):
  """Starts the processes of one launch; :func:`_wait` collects them."""
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
    [os.path.dirname(os.path.dirname(HERE)), env.get("PYTHONPATH", "")]
  )
  env["XLA_FLAGS"] = " ".join(  # each worker sets its own device count
    f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f
  )
  port = str(_free_port())
  workdir = str(tmp_path / name)
  procs, outs = [], []
  for pid in range(num_processes):
    out = tmp_path / f"{name}_{stop_after}_{pid}.json"
    outs.append(out)
    procs.append(
      subprocess.Popen(
        [sys.executable, WORKER, str(pid), str(num_processes), port]
        + [str(devices), workdir, str(stop_after), str(out), *mode],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
      )
    )
  return procs, outs


def _wait(launch):
  procs, outs = launch
  for p in procs:
    log, _ = p.communicate(timeout=300)
    assert p.returncode == 0, log[-3000:]
  return [json.loads(o.read_text()) for o in outs]


def _launch(*args, **kwargs):
  return _wait(_start(*args, **kwargs))


# Slow (about 70 s on 2 cores: three runner processes, one of them starting
# 40 s late); CI runs it in its slow step, with XLA's default emitters.
@pytest.mark.slow
@pytest.mark.xla_defaults
@pytest.mark.integration
def test_two_processes_with_resume_equal_one_process(tmp_path):
  reference = _start(tmp_path, "single", 1, 4, stop_after=100)
  # Process 1 starts 40 s late: process 0 waits at the run's barrier, not
  # in a collective (which would give up after 30 s).
  first = _launch(tmp_path, "multi", 2, 2, stop_after=10, mode=("late_start",))
  (single,) = _wait(reference)
  assert [r["interrupted_at"] for r in first] == [10, 10]
  assert len(os.listdir(tmp_path / "multi" / "checkpoints" / "10")) > 0
  shards = os.listdir(tmp_path / "multi" / "checkpoints" / "10" / "state")
  assert {"ocdbt.process_0", "ocdbt.process_1"} <= set(shards), shards
  final = _launch(tmp_path, "multi", 2, 2, stop_after=100)

  assert single["process_count"] == 1 and single["local_devices"] == 4
  for r in final:
    assert r["process_count"] == 2 and r["local_devices"] == 2
    for key in ("params_sha256", "test_accuracy", "epsilon"):
      assert r[key] == single[key], (key, r[key], single[key])
  # Each process sees only its half of the training set and gathers only
  # its own block of every batch.
  (rows, seen) = single["rows_gathered"][-1]
  for r in first + final:
    assert r["rows_gathered"], r
    for block, visible in r["rows_gathered"]:
      assert visible in (seen // 2, seen - seen // 2), (visible, seen)
      assert block < rows, (block, rows)
  # The secret shared at start-up is the same everywhere (process 1 drew
  # its own and received process 0's).
  assert len({r["shared_secret_sha256"] for r in first + final}) == 2
  assert first[0]["shared_secret_sha256"] == first[1]["shared_secret_sha256"]


# Slow (two processes, every registered estimator for 3 steps).
@pytest.mark.slow
@pytest.mark.integration
def test_every_estimator_adds_the_same_secret_noise_on_both_processes(
  tmp_path,
):
  """OS-entropy secrets (no test seed): each process draws its own keys at
  init, the runner binds them to the broadcast run secret, so both
  processes add the same noise and end with identical parameters."""

  results = _launch(
    tmp_path, "every", 2, 2, stop_after=100, mode=("every_estimator",)
  )
  first, second = (r["digests"] for r in results)
  assert sorted(first) == sorted(second) == sorted(registry.names())
  for name in first:
    assert first[name] is not None, name
    assert first[name] == second[name], name
    for r in results:  # secret noise, not the insecure test seed
      assert r["private"][name] == registry.get(name).private, name
      if registry.get(name).private:
        assert r["noise_sources"][name] == "os_entropy", r["noise_sources"]
  # A second run draws a fresh secret (process 0's, broadcast): other
  # noise, still the same on both processes.
  again = [r["dpzero_again"] for r in results]
  assert again[0] == again[1] and again[0] != first["dpzero"]
