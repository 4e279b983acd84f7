"""docs/library.md's worked example runs as written (its own assertions:
the state holds the returned plan, the epsilon spent is within the
target), in a fresh interpreter as a user would paste it."""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parents[2]


def _example() -> str:
  text = (ROOT / "docs" / "library.md").read_text()
  return re.findall(r"```python\n(.*?)```", text, re.S)[0]


def _run(code: str) -> str:
  out = subprocess.run(
    [sys.executable, "-c", code],
    capture_output=True,
    text=True,
    cwd=ROOT,
    check=False,
    timeout=600,
  )
  assert out.returncode == 0, out.stdout + out.stderr
  return out.stdout


def test_worked_example_runs_with_fewer_steps():
  """The same code, calibrated for its 200 steps, stopped after 20: the
  epsilon read from the state counts the 20 releases made."""
  code = _example()
  loop = "for t in range(num_steps):\n"
  assert "num_steps = 200\n" in code and loop in code
  stdout = _run(code.replace(loop, "for t in range(20):\n"))
  assert "Poisson sampling p=0.032" in stdout
  assert "zoprivacy.PoissonSampler" in stdout
  spent = float(re.search(r"epsilon (\S+) \(target 2\)", stdout).group(1))
  assert 0.1 < spent < 1.0  # 20 of 200 steps: well under the target


@pytest.mark.slow  # 200 exact-noise steps and their calibration: ~15 s
def test_worked_example_runs_as_written_and_learns():
  stdout = _run(_example())
  spent = float(re.search(r"epsilon (\S+) \(target 2\)", stdout).group(1))
  accuracy = float(re.search(r"train accuracy (\S+)", stdout).group(1))
  assert 1.9 < spent <= 2.0
  assert accuracy > 0.85  # a separable problem; chance is about 0.5
