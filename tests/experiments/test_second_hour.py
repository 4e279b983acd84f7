"""A researcher's second hour, walked as a user on the command line: the
config file written from scratch that docs/experiments.md shows, run in
epochs with a logical batch in physical chunks, then the same command with
a workdir that is not the run's own (refused in one paragraph)."""

import json
import math
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).parents[2]
DIGITS_TRAIN = 1431  # digits' training images at seed 0


def _documented_config() -> str:
  text = (ROOT / "docs" / "experiments.md").read_text()
  section = text.split("### A config file written from scratch", 1)[1]
  return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _run(config, workdir, *extra):
  return subprocess.run(
    [
      sys.executable,
      "-m",
      "experiments.run",
      "--config",
      str(config),
      "--config.num_epochs=0.5",
      "--config.physical_batch_size=16",
      "--config.eval_every=0",
      f"--config.workdir={workdir}",
      *extra,
    ],
    capture_output=True,
    text=True,
    cwd=ROOT,
    check=False,
    timeout=300,
  )


def test_a_config_from_scratch_in_epochs_chunked_then_a_foreign_workdir(
  tmp_path,
):
  code = _documented_config()
  assert "default" not in code  # written from scratch
  config = tmp_path / "mine.py"
  config.write_text(code)
  workdir = tmp_path / "run"
  out = _run(config, workdir)
  assert out.returncode == 0, out.stdout + out.stderr
  first = out.stdout.splitlines()[0]
  assert first.startswith("note: the config leaves")
  assert "privacy.clip=1.0" in first and "privacy.noise='exact'" in first

  result = json.loads((workdir / "result.json").read_text())
  steps = math.ceil(0.5 * DIGITS_TRAIN / 64)  # 12
  assert result["num_steps"] == steps and result["num_epochs"] == 0.5
  assert result["num_epochs_source"] == "set by the config (num_epochs)"
  assert result["physical_batch_size"] == 16
  assert "not a privacy one" in result["physical_batch_note"]
  assert "privacy.clip" in result["defaults_filled"]
  assert "physical_batch_size" not in result["defaults_filled"]  # overridden
  assert result["config"]["num_steps"] == steps
  assert result["epsilon"] <= 2.0 and result["ledger"]["num_steps"] == steps
  assert f"steps: {steps} (0.5 epochs;" in out.stdout
  assert "physical batch: 16 rows at a time" in out.stdout

  # The same command in a folder that holds someone else's file.
  foreign = tmp_path / "thesis"
  foreign.mkdir()
  (foreign / "chapter1.tex").write_text("\\chapter{Introduction}\n")
  refused = _run(config, foreign)
  assert refused.returncode != 0
  assert "Traceback" not in refused.stderr + refused.stdout
  words = " ".join(refused.stderr.split())  # the paragraph, unwrapped
  assert "holds no previous run (chapter1.tex)" in words
  assert "A workdir is the run's own" in words
  assert len(refused.stderr.strip().splitlines()) <= 6  # one paragraph
  assert sorted(p.name for p in foreign.iterdir()) == ["chapter1.tex"]
