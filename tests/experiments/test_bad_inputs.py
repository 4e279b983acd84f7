"""Twenty bad inputs to ``python -m experiments.run``: one paragraph each,
no traceback, and fast unless the check needs the data.

``ZOPRIVACY_ERROR_TABLE=<path>`` writes the markdown table of the inputs,
the first line of each message, the seconds each took and its CPU seconds
(docs/experiments.md holds one, with the machine's load when it was
measured).
"""

import os
import re
import resource
import signal
import subprocess
import sys
import time

import pytest

from experiments.run import errors
from zoprivacy import estimator_manifest

ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
BASE = ["--config", "configs/default.py"]
# (what, arguments, needs the data or the plan's accounting)
BAD_INPUTS = [
  ("no --config", [], False),
  ("missing config file", ["--config", "configs/nope.py"], False),
  ("unparsable config file", ["--config", "{bad_config}"], False),
  ("unknown config field", [*BASE, "--config.nosie=1"], False),
  ("estimator typo", [*BASE, "--config.estimator=dpzer0"], False),
  ("epsilon 0", [*BASE, "--config.privacy.target_epsilon=0"], False),
  ("epsilon < 0", [*BASE, "--config.privacy.target_epsilon=-1"], False),
  ("delta 1", [*BASE, "--config.privacy.delta=1.0"], False),
  ("delta 0", [*BASE, "--config.privacy.delta=0.0"], False),
  (
    "no epsilon, no multiplier",
    [*BASE, "--config.privacy.target_epsilon=None"],
    False,
  ),
  (
    "noise multiplier < 0",
    [*BASE, "--config.privacy.noise_multiplier=-2"],
    False,
  ),
  ("num_steps 0", [*BASE, "--config.num_steps=0"], False),
  ("num_steps 1e12", [*BASE, "--config.num_steps=1e12"], False),
  ("num_steps 10^9", [*BASE, "--config.num_steps=1000000000"], False),
  ("batch 0", [*BASE, "--config.privacy.expected_batch_size=0"], False),
  ("clip 0", [*BASE, "--config.privacy.clip=0"], False),
  ("smoothing < 0", [*BASE, "--config.estimator_kwargs.smoothing=-1"], False),
  (
    "unknown estimator kwarg",
    [*BASE, "--config.estimator_kwargs.clipp=1"],
    False,
  ),
  ("unknown optimizer", [*BASE, "--config.optimizer=adamm"], False),
  ("MultiSteps optimizer", [*BASE, "--config.optimizer=MultiSteps"], False),
  ("shuffling, private", [*BASE, "--config.privacy.sampling=shuffle"], False),
  ("workdir is a file", [*BASE, "--config.workdir={a_file}"], False),
  ("workdir unwritable", [*BASE, "--config.workdir=/dev/null/run"], False),
  ("batch > data", [*BASE, "--config.privacy.expected_batch_size=5000"], True),
  # A target above the budget is refused from the two numbers alone.
  ("budget too small", [*BASE, "--config.epsilon_budget=0.5"], False),
  ("workdir not a run's", [*BASE, "--config.workdir={a_folder}"], False),
  ("seed None", [*BASE, "--config.seed=None"], False),
  ("smoothing nan", [*BASE, "--config.estimator_kwargs.smoothing=nan"], False),
  ("smoothing a word", [*BASE, "--config.estimator_kwargs.smoothing=a"], False),
]
# Every check that needs no data is reported in under FAST_CPU_S. Load
# policy: the bound is on the CPU time of the child process (user + system,
# from resource.getrusage(RUSAGE_CHILDREN)), which waiting for a core under
# load does not add to; the rows take ~0.1-0.3 s of CPU (before JAX loads),
# so the bound leaves over 5x for slower cores and cache contention, while
# a check that imports JAX and the estimators (3-5 s of CPU) fails it.
FAST_CPU_S = 2.0
FAST_S = 60.0  # wall clock: catches a hang (huge accounting) at any load


# Runs the command line and, at exit, says on stdout whether JAX was loaded.
WATCH_JAX = (
  "import atexit, runpy, sys; "
  "atexit.register(lambda: print('jax loaded:', 'jax' in sys.modules)); "
  "sys.argv[0] = 'run.py'; "
  "runpy.run_module('experiments.run', run_name='__main__', alter_sys=True)"
)


def _run(args, tmp_path, *, watch_jax=False):
  bad = tmp_path / "bad_config.py"
  bad.write_text("def get_config(:\n")
  a_file = tmp_path / "a_file"
  a_file.write_text("")
  a_folder = tmp_path / "a_folder"  # another program's files
  a_folder.mkdir(exist_ok=True)
  (a_folder / "notes.txt").write_text("")
  args = [
    a.format(bad_config=bad, a_file=a_file, a_folder=a_folder) for a in args
  ]
  start, before = time.time(), _children_cpu()
  out = subprocess.run(
    [sys.executable, *(["-c", WATCH_JAX] if watch_jax else ["-m"])]
    + (["experiments.run"] if not watch_jax else [])
    + args,
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  return out, time.time() - start, _children_cpu() - before


def _children_cpu() -> float:
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def _check(out, seconds, cpu, needs_data):
  message = out.stderr.strip()
  assert out.returncode == 2, (out.returncode, message[-2000:])
  assert "Traceback" not in out.stderr and "Traceback" not in out.stdout
  assert message and message.count("\n") <= 6, message
  if not needs_data:
    assert seconds < FAST_S, seconds
    assert cpu < FAST_CPU_S, (cpu, message)
  return message.splitlines()[0]


# The estimator's declaration (4, 9, 17, 18, 20, 24) comes from the manifest.
@pytest.mark.parametrize(
  "index", [0, 1, 2, 3, 4, 5, 7, 9, 13, 17, 18, 20, 24, 25, 26, 27, 28]
)
def test_errors_found_before_jax_loads_are_one_paragraph(index, tmp_path):
  what, args, needs_data = BAD_INPUTS[index]
  if what == "unknown optimizer" and estimator_manifest.optax_names() is None:
    pytest.skip("the manifest lists another optax version's names")
  out, seconds, cpu = _run(args, tmp_path, watch_jax=True)
  _check(out, seconds, cpu, needs_data)
  assert "jax loaded: False" in out.stdout, out.stdout


@pytest.mark.slow  # 29 command lines, ~3 min on 2 cores under load
def test_twenty_bad_inputs_table(tmp_path):
  rows = []
  for what, args, needs_data in BAD_INPUTS:
    out, seconds, cpu = _run(args, tmp_path)
    first = re.sub(
      r"'?/tmp/\S*", "<tmp>", _check(out, seconds, cpu, needs_data)
    )
    shown = " ".join(a for a in args if a not in BASE).format(
      bad_config="(a file with a syntax error)",
      a_file="(a file)",
      a_folder="(a folder of other files)",
    )
    rows.append(
      f"| {what} | `{shown or '(none)'}` | {first.replace('|', '/')} "
      f"| {seconds:.2f}{' (data)' if needs_data else ''} | {cpu:.2f} |"
    )
  assert len(rows) >= 20
  path = os.environ.get("ZOPRIVACY_ERROR_TABLE")
  if path:
    with open(path, "w") as f:
      f.write(
        f"load average when measured: {open('/proc/loadavg').read().split()[0]}"
        " (2 cores)\n\n| input | arguments | first line | seconds | CPU s |\n"
        "|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
      )


@pytest.mark.slow  # one short run interrupted, then resumed (~40 s)
def test_ctrl_c_says_where_to_resume_and_the_rerun_does(tmp_path):
  args = [
    *BASE,
    "--config.num_steps=1500",
    "--config.eval_every=50",
    "--config.checkpoint_every=50",
    f"--config.workdir={tmp_path}",
  ]
  cmd = [sys.executable, "-m", "experiments.run", *args]
  proc = subprocess.Popen(
    cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
  )
  deadline = time.time() + 240
  metrics = tmp_path / "metrics.jsonl"
  while time.time() < deadline and proc.poll() is None:
    if metrics.exists() and len(metrics.read_text().splitlines()) >= 3:
      break
    time.sleep(0.05)
  proc.send_signal(signal.SIGINT)
  stdout, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 2, stderr[-2000:]
  assert "Traceback" not in stderr
  assert "rerun the same command to resume" in stderr
  step = int(stderr.split("interrupted at step ")[1].split(";")[0])
  assert step >= 100
  resumed = subprocess.run(
    cmd,
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  # Checkpointed at the interrupt (or, if that save was cut, at the last
  # checkpoint before it).
  line = resumed.stdout.split("resumed from step ")[1]
  restored = int(line.split(" ")[0])
  assert restored == step or (restored % 50 == 0 and restored <= step)
  assert line.split(" ", 1)[1].startswith("(epsilon so far")


def test_a_full_disk_and_ctrl_c_read_as_one_paragraph():
  import errno  # pylint: disable=g-import-not-at-top

  full = errors.one_paragraph(
    OSError(errno.ENOSPC, "No space left on device", "/run/metrics.csv")
  )
  assert full.startswith("error (OSError): disk full (/run/metrics.csv)")
  assert "rerun the same command to resume" in " ".join(full.split())
  assert errors.one_paragraph(errors.RunInterrupted(1234)) == (
    "interrupted at step 1234; rerun the same command to resume."
  )
  assert isinstance(errors.RunInterrupted(1), errors.user_errors())
