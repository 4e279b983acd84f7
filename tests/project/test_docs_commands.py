"""Every example command in README.md and docs/*.md runs, in its smallest form.

Training commands get a few steps; a command whose data is not on this
machine must fail the documented way (exit 2 with a MissingDataError
paragraph naming the files), never with a traceback.
"""

import glob
import shlex
import subprocess
import sys

import pytest

# Commands that run in CI's slow step only: the tiny OPT's
# (test_tiny_opt_sst2.py), the default config at another target
# (test_end_to_end.py runs it) and the other estimators' configs (their
# keys are checked by test_offline_configs_are_complete, each estimator
# trains and resumes in test_runner_privacy.py, and dp_zo_laplace runs
# from the command line in test_end_to_end.py).
SLOW_WHEN = (
  "configs/tiny_opt_sst2.py",
  "configs/tiny_opt_squad.py",  # test_tiny_opt_squad.py runs it too
  "--config.privacy.target_epsilon=4",
  "configs/mezo.py",
  "configs/dp_zo_gaussian.py",
  "configs/dp_zo_laplace.py",
  "configs/dpgd_zeroth.py",
  "configs/dp_sgd.py",
  # docs/extending.md's: test_vr_dpzero_run.py runs it in-process.
  "--config.estimator=vr_dpzero",
  # docs/trajectory.md's (the default config in full, 11 s on 2 cores):
  # test_trajectory.py's test_runner_log_survives_resume_and_replays_to_the_
  # result writes and replays a runner's log here.
  "--config.trajectory_log=True",
)
# Whole commands run in CI's slow step because a slow test runs them as
# written: README's first command in full
# (tests/experiments/test_end_to_end.py::
# test_readme_first_command_prints_accuracy_and_epsilon).
SLOW_EXACTLY = ("python -m experiments.run --config configs/default.py",)

# The README's first set-up command ends with the main job.
MAIN_COMMAND = "python -m experiments.run --config configs/default.py"

SMALL = [
  "--config.num_steps=3",
  "--config.eval_every=0",
  "--config.checkpoint_every=0",
]


def _shell_blocks(text):
  """Bodies of fenced blocks tagged bash/sh/shell or untagged."""
  blocks, body, lang = [], None, None
  for line in text.splitlines():
    if line.startswith("```"):
      if body is None:
        body, lang = [], line[3:].strip()
      else:
        if lang in ("", "bash", "sh", "shell"):
          blocks.append("\n".join(body) + "\n")
        body = None
    elif body is not None:
      body.append(line)
  return blocks


def _commands():
  found, seen = [], set()
  for path in ["README.md"] + sorted(glob.glob("docs/*.md")):
    text = open(path).read()
    for block in _shell_blocks(text):
      for line in block.replace("\\\n", " ").splitlines():
        line = line.split("#")[0].strip()
        if "&&" in line:
          line = line.split("&&")[-1].strip()
        if line.startswith(
          (
            "python -m experiments.run",
            "python -m zoprivacy.accounting",
            "python -m zoprivacy.privacy",
          )
        ):
          if "one_point" in line:  # docs/extending.md: needs its module
            continue
          if line not in seen:  # the same command in two places runs once
            seen.add(line)
            slow = line in SLOW_EXACTLY or any(s in line for s in SLOW_WHEN)
            found.append(
              pytest.param(
                line,
                id=f"{path}:{line[10:70]}",
                marks=pytest.mark.slow if slow else (),
              )
            )
  return found


@pytest.mark.parametrize("command", _commands())
def test_documented_command_runs(command, tmp_path):
  argv = shlex.split(command)
  argv = [sys.executable if a == "python" else a for a in argv]
  if "experiments.run" in command:
    # Every workdir goes under tmp_path: a documented one (/ckpt/run1, say)
    # may hold a run of an older config on this machine.
    argv = [
      f"--config.workdir={tmp_path / 'run'}"
      if a.startswith("--config.workdir=")
      else a
      for a in argv
    ]
    argv += SMALL
  r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
  assert "Traceback" not in r.stderr, r.stderr[-2000:]
  if r.returncode == 2 and "MissingDataError" in r.stderr:
    return
  assert r.returncode == 0, r.stderr[-2000:]
  if "experiments.run" in command:
    if "squad" in command:  # a generation task: F1 and exact match
      assert "test F1:" in r.stdout and "accuracy" not in r.stdout
    else:
      assert "test accuracy:" in r.stdout
    if command == MAIN_COMMAND:  # what the README says it prints
      assert "(epsilon, delta) = (" in r.stdout
      assert "exact integer noise" in r.stdout
  else:
    assert "epsilon" in r.stdout.lower() or "sigma" in r.stdout.lower()


def test_the_docs_have_commands():
  assert len(_commands()) >= 10
  assert MAIN_COMMAND in [p.values[0] for p in _commands()]
