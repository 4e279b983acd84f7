"""dpzero on 8 simulated CPU devices equals the single-device step.

The check runs in a subprocess because the simulated device count must be
set before JAX initialises (this test process has already started JAX).
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(__file__)


def test_sharded_dpzero_step_matches_single_device():
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      [os.path.dirname(HERE), env.get("PYTHONPATH", "")])
  out = subprocess.run([sys.executable, os.path.join(HERE, "sharded_step_check.py")],
                       capture_output=True, text=True, env=env, timeout=300, check=True)
  result = json.loads(out.stdout.strip().splitlines()[-1])
  # Same key => same direction and noise; only the order of the batch
  # reduction differs across devices. Tolerance: 1e-6 absolute on parameters.
  assert result["max_abs_diff"] <= 1e-6, result
  # The only cross-device traffic is the all-reduce of the q = 1 clipped sum:
  # a scalar, never a parameter-sized tensor.
  assert result["collectives"], result
  assert all(kind == "all-reduce" for kind, _ in result["collectives"]), result
  assert max(result["collective_sizes"]) == 1, result
  assert result["num_params"] > 1000
