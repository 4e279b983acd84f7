"""Runs a check script in a subprocess with simulated CPU devices.

The device count (``--xla_force_host_platform_device_count``, set by each
script) must be fixed before JAX initialises, and the test process has
already started JAX, so multi-device checks run as their own process and
print one JSON line.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(__file__)


def run_check(script: str, timeout: int = 600, args=()) -> dict:
  """The JSON printed last by ``tests/<script> *args``."""
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
    [os.path.dirname(HERE), env.get("PYTHONPATH", "")]
  )
  out = subprocess.run(
    [sys.executable, os.path.join(HERE, script), *args],
    capture_output=True,
    text=True,
    env=env,
    timeout=timeout,
    check=True,
  )
  return json.loads(out.stdout.strip().splitlines()[-1])
