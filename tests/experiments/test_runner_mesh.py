"""The main command on 8 simulated devices uses them all and learns the same.

``python -m experiments.run --config configs/default.py`` unchanged: with 8
devices the default mesh puts all of them on ``data``; ``--config.mesh`` asks
for FSDP. Same public seed and test noise seed as the one-device run, so the
runs differ only in the order of floating-point reductions (and, on a
bigger padded batch, nothing else: padding is masked). Tolerance: test
accuracy within 0.03 after 150 steps (about 16 of 540 test digits).
"""

import json
import os
import subprocess
import sys

import pytest

ARGS = (
  "--config.num_steps=150",
  "--config.eval_every=0",
  "--config.insecure_test_noise=True",
  "--config.privacy.noise=float",
)


def _run(tmp_path, name, devices, *extra):
  env = dict(os.environ)
  env["XLA_FLAGS"] = (
    env.get("XLA_FLAGS", "")
    + f" --xla_force_host_platform_device_count={devices}"
  )
  env["JAX_PLATFORMS"] = "cpu"
  if devices > 1:  # no executables shared with one-device processes
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
  workdir = tmp_path / name
  out = subprocess.run(
    [
      sys.executable,
      "-m",
      "experiments.run",
      "--config",
      "configs/default.py",
      *ARGS,
      f"--config.workdir={workdir}",
      *extra,
    ],
    capture_output=True,
    text=True,
    env=env,
    timeout=600,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  with open(workdir / "result.json") as f:
    return json.load(f), out.stdout


@pytest.mark.slow  # three 150-step runs, two of them on 8 simulated devices
@pytest.mark.integration
def test_default_command_uses_every_device_and_fsdp_on_request(tmp_path):
  one, _ = _run(tmp_path, "one", 1)
  eight, report = _run(tmp_path, "eight", 8)
  fsdp, _ = _run(
    tmp_path, "fsdp", 8, "--config.mesh.data=2", "--config.mesh.fsdp=4"
  )
  assert one["mesh"] == {"data": 1, "fsdp": 1, "model": 1}
  assert eight["mesh"] == {"data": 8, "fsdp": 1, "model": 1}
  assert "mesh of 8 devices (data=8)" in report
  assert fsdp["mesh"] == {"data": 2, "fsdp": 4, "model": 1}
  for other in (eight, fsdp):
    assert abs(other["test_accuracy"] - one["test_accuracy"]) <= 0.03
    assert other["epsilon"] == one["epsilon"]  # one plan, one ledger
  assert one["test_accuracy"] > 0.2  # above chance (0.1): it learned
