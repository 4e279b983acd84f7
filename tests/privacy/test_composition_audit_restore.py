"""Composition audit: a library user's state restored twice, as an attacker.

The attacker holds a saved state (orbax or pickle), restores it twice and
steps one copy on ``D`` and the other on ``D' = D - {record 0}``. Had the
two releases shared their noise, their difference would be the noise-free
difference of the sums (record 0's clipped values: the whole clip, ``m``
grid units per query), and record 0 would be revealed exactly. The audit
subtracts that noise-free difference from each pair of releases (exact
noise: every release is an integer number of grid units) and checks:

* **never cancelled**: no pair's residual is zero on every query (with
  independent noise, a zero on all four queries has probability below
  ``1e-15``);
* **independent noise**: the residuals are differences of two independent
  discrete Gaussians: mean 0, variance ``2 sigma^2`` (the plan's integer
  sigma), within bounds that fail by chance with probability below
  ``1e-4``;

for copies restored in the saving process (the attacker's worst case: the
process's keyring knows the handle) and in two new processes, one per
copy (one of them steps on a mesh of 8 simulated devices). The audit's control: bound keys (explicit ones, whose noise is a
pure function of the state, as every key was before) fail the first check
on every pair.
"""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
import restore_worker as rw

import zoprivacy
from zoprivacy.privacy import noise_sessions
from zoprivacy.privacy.noise_keys import explicit_key

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TRIALS = 150  # saved states; 4 queries each


def _victim(n: int):
  """``n`` states of the library user, each stepped once on ``D``."""
  return [rw.STEP(s, rw.MASKS[0]) for s in rw.template(n)]


def residuals(pairs, difference) -> np.ndarray:
  """``[n, queries]``: each pair's release difference, in grid units,
  minus the noise-free difference: the difference of the two noises."""
  out = np.asarray([(a - b) * rw.SCALE - difference for a, b in pairs])
  np.testing.assert_allclose(out, np.round(out), atol=1e-2)  # on the grid
  return np.round(out)


def check_not_cancelled(res: np.ndarray) -> None:
  cancelled = int(np.sum(np.all(res == 0, axis=1)))
  assert cancelled == 0, f"{cancelled} of {len(res)} pairs cancel the noise"


def check_independent(res: np.ndarray) -> None:
  """Mean within 5 standard errors of 0 and variance within 5 standard
  errors of ``2 sigma^2`` (normal approximation: a false failure below
  ``1e-4`` for the two together)."""
  sigma = rw.PLAN.integer_noise_scale  # the plan's sigma, in grid units
  var, n = 2 * sigma**2, res.size
  assert abs(res.mean()) < 5 * np.sqrt(var / n), res.mean()
  assert abs(res.var() / var - 1) < 5 * np.sqrt(2 / n), res.var() / var


def _in_process_pairs(fmt, path, n):
  first, second = rw.load(fmt, path, n), rw.load(fmt, path, n)
  with pytest.warns(noise_sessions.RecomputedStepWarning):
    return [(rw.release(a, 0), rw.release(b, 1)) for a, b in zip(first, second)]


def _new_process_releases(fmt, path, take):
  """The releases of the first ``take`` states, restored in two new
  processes (run side by side): one steps them on ``D``, the other on
  ``D'``, on a mesh of 8 devices (one key lookup per step, whose key
  every device shares)."""
  procs = []
  for neighbour in (0, 1):
    spec = {
      "format": fmt,
      "path": path,
      "num_states": TRIALS,
      "take": take,
      "neighbour": neighbour,
      "mesh": neighbour == 1,  # D' on a mesh of 8 simulated devices
    }
    env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
    flags = env.get("XLA_FLAGS", "").split()
    flags = [f for f in flags if "device_count" not in f]
    if spec["mesh"]:
      flags.append("--xla_force_host_platform_device_count=8")
    env["XLA_FLAGS"] = " ".join(flags)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    worker = os.path.join(HERE, "restore_worker.py")
    procs.append(
      subprocess.Popen(
        [sys.executable, worker, json.dumps(spec)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
      )
    )
  releases = []
  for proc in procs:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["warnings"] == 0  # a new process knows no handle
    releases.append([np.asarray(r) for r in result["released"]])
  return zip(*releases)


@pytest.mark.slow  # 300 steps in process, two new processes (~50-70 s)
@pytest.mark.parametrize("fmt", ["orbax", "pickle"])
def test_a_state_restored_twice_cannot_cancel_the_noise(fmt, tmp_path):
  states = _victim(TRIALS)
  keys = [explicit_key(s[0]) for s in states]  # the keyring's, in memory
  path = str(tmp_path / f"states.{fmt}")
  rw.save(states, fmt, path)
  for root, _, files in os.walk(tmp_path):  # no secret at rest
    for name in files:
      data = open(os.path.join(root, name), "rb").read()
      assert not any(
        np.asarray(jax.random.key_data(k), np.uint32).tobytes() in data
        for k in keys
      ), name
  difference = rw.noise_free_difference(states[0])
  assert np.all(np.abs(difference) == rw.PLAN.grid_points)  # record 0: C
  res = residuals(_in_process_pairs(fmt, path, TRIALS), difference)
  check_not_cancelled(res)
  check_independent(res)
  pairs = _new_process_releases(fmt, path, TRIALS // 3)
  res = residuals(pairs, difference)
  check_not_cancelled(res)
  check_independent(res)


@pytest.mark.slow  # the audit's control (~10 s)
def test_the_audit_catches_bound_keys_restored_twice(tmp_path):
  """Explicit keys (the behaviour before session keys) replay their noise:
  every pair cancels, and the first check fails."""
  states = [
    rw.STEP(
      zoprivacy.refresh_noise_keys(s, secret=bytes([i]) * 32), rw.MASKS[0]
    )
    for i, s in enumerate(rw.template(20))
  ]
  path = str(tmp_path / "states.pickle")
  rw.save(states, "pickle", path)
  first, second = rw.load("pickle", path, 20), rw.load("pickle", path, 20)
  pairs = [(rw.release(a, 0), rw.release(b, 1)) for a, b in zip(first, second)]
  res = residuals(pairs, rw.noise_free_difference(states[0]))
  assert np.all(res == 0)
  with pytest.raises(AssertionError, match="20 of 20 pairs cancel"):
    check_not_cancelled(res)
