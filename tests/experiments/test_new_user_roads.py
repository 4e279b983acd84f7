"""The roads a new user walks first, each as a subprocess, one after the
other: ``optax.MultiSteps`` around an estimator in a script, a misspelled
field in a config file, MeZO and PAZO-M by override on the default config,
Ctrl-C and the rerun. Each works correctly (exit 0 and an accuracy well
above chance) or ends in one clear paragraph with a non-zero exit.

The seconds each road took are printed (``pytest -s``) and, with
``ZOPRIVACY_ROADS_TIMES=<file>``, written as a markdown table with the
machine's load.
"""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
RUN = [sys.executable, "-m", "experiments.run"]
DEFAULT = ["--config", "configs/default.py"]
CHANCE = 0.10  # ten digit classes

MULTISTEPS_SCRIPT = """
import jax.numpy as jnp
import numpy as np
import optax
import zoprivacy

rng = np.random.default_rng(0)
x = jnp.asarray(rng.normal(size=(64, 4)), jnp.float32)
y = x @ jnp.asarray([1.0, -2.0, 0.5, 3.0])
loss = lambda w, b: (b[0] @ w - b[1]) ** 2
est = zoprivacy.dpzero(
  clip=1.0, noise_multiplier=1.0, expected_batch_size=8, dataset_size=64
)
tx = optax.MultiSteps(optax.chain(est, optax.sgd(0.1)), 4)
step = zoprivacy.make_step(tx, loss)
w, state = jnp.zeros(4), tx.init(jnp.zeros(4))
for t in range(8):
  w, state = step(w, state, (x[8 * t : 8 * t + 8], y[8 * t : 8 * t + 8]))
plan = zoprivacy.find_plan(state)
print("epsilon", plan.epsilon(num_steps=8, delta=1e-5))
"""

TYPO_CONFIG = """
from configs import default


def get_config():
  c = default.get_config()
  c.num_step = 100
  c.learning_rat = 0.05
  return c
"""


def _run(args, timeout=1200, **kw):
  start = time.time()
  r = subprocess.run(
    args, cwd=ROOT, capture_output=True, text=True, timeout=timeout, **kw
  )
  return r, time.time() - start


def _paragraph(r) -> str:
  """The refusal's text: non-zero exit, no traceback, one short paragraph."""
  text = r.stderr.strip()
  assert r.returncode != 0, (r.returncode, r.stdout[-1000:])
  assert "Traceback" not in r.stderr, text[-2000:]
  assert text and len(text.splitlines()) <= 8, text
  return " ".join(text.split())


def _accuracy(r) -> float:
  assert r.returncode == 0, r.stderr[-2000:]
  return float(re.search(r"test accuracy: ([0-9.]+)", r.stdout).group(1))


def _multisteps(tmp_path):
  """The library refuses the wrapper when the step is traced: one
  paragraph (what, why, the fix) as the script's exception."""
  script = tmp_path / "multisteps.py"
  script.write_text(MULTISTEPS_SCRIPT)
  env = dict(os.environ, PYTHONPATH=ROOT)  # this checkout's zoprivacy
  r, seconds = _run([sys.executable, str(script)], env=env)
  assert r.returncode != 0 and "epsilon" not in r.stdout, r.stdout
  error = "zoprivacy.privacy.wrappers.SkippingWrapperError: "
  lines = [x for x in r.stderr.splitlines() if x.startswith(error)]
  assert len(lines) == 1, r.stderr[-2000:]
  text = lines[0].removeprefix(error)
  assert text.startswith("optax.MultiSteps wraps a zoprivacy estimator")
  assert "count fewer releases" in text  # why
  assert "use a larger expected_batch_size" in text  # the fix
  return seconds, "refused: " + text[:100]


def _typo(tmp_path):
  path = tmp_path / "typo.py"
  path.write_text(textwrap.dedent(TYPO_CONFIG))
  r, seconds = _run([*RUN, "--config", str(path)])
  text = _paragraph(r)
  assert "'num_step' (did you mean 'num_steps'?)" in text
  assert "'learning_rat' (did you mean 'learning_rate'?)" in text
  return seconds, "refused: " + text[:100]


def _mezo():
  """The whole default run with MeZO: ``configs/mezo.py`` gives 0.8858."""
  r, seconds = _run([*RUN, *DEFAULT, "--config.estimator=mezo"])
  accuracy = _accuracy(r)
  assert "learning rate: 0.001 (mezo's registered default)" in r.stdout
  assert accuracy > 0.7, r.stdout
  return seconds, f"test accuracy {accuracy:.4f}"


def _pazo_m():
  r, seconds = _run([*RUN, *DEFAULT, "--config.estimator=pazo_m"])
  text = _paragraph(r)
  assert "--config.public=stratified4" in text
  missing = seconds
  r, seconds = _run(
    [
      *RUN,
      *DEFAULT,
      "--config.estimator=pazo_m",
      "--config.public=stratified4",
      "--config.num_steps=1000",
    ]
  )
  accuracy = _accuracy(r)
  assert accuracy > 0.7 and "(epsilon, delta) = (" in r.stdout, r.stdout
  return seconds, (
    f"test accuracy {accuracy:.4f} at epsilon 2 in 1000 steps (without "
    f"--config.public: refused in {missing:.1f} s)"
  )


def _interrupt_and_rerun(tmp_path):
  args = [
    *RUN,
    *DEFAULT,
    "--config.num_steps=1500",
    "--config.eval_every=50",
    "--config.checkpoint_every=50",
    f"--config.workdir={tmp_path / 'run'}",
  ]
  start = time.time()
  proc = subprocess.Popen(
    args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
  )
  metrics = tmp_path / "run" / "metrics.jsonl"
  deadline = time.time() + 600
  while time.time() < deadline and proc.poll() is None:
    if metrics.exists() and len(metrics.read_text().splitlines()) >= 3:
      break
    time.sleep(0.05)
  proc.send_signal(signal.SIGINT)
  _, stderr = proc.communicate(timeout=300)
  interrupted = time.time() - start
  assert proc.returncode == 2 and "Traceback" not in stderr, stderr[-2000:]
  step = int(stderr.split("interrupted at step ")[1].split(";")[0])
  r, seconds = _run(args)
  accuracy = _accuracy(r)
  assert "resumed from step " in r.stdout and accuracy > 0.5, r.stdout
  return interrupted + seconds, (
    f"interrupted at step {step} after {interrupted:.1f} s; the rerun "
    f"resumed and finished in {seconds:.1f} s (test accuracy "
    f"{accuracy:.4f})"
  )


def test_a_new_users_roads_work_or_end_in_one_paragraph(tmp_path):
  roads = {
    "optax.MultiSteps in a script": lambda: _multisteps(tmp_path),
    "misspelled fields in a config file": lambda: _typo(tmp_path),
    "--config.estimator=mezo": _mezo,
    "--config.estimator=pazo_m --config.public=stratified4": _pazo_m,
    "Ctrl-C, then the same command": lambda: _interrupt_and_rerun(tmp_path),
  }
  rows = []
  for road, walk in roads.items():
    seconds, outcome = walk()
    rows.append(f"| {road} | {seconds:.1f} | {outcome} |")
  load = open("/proc/loadavg").read().split()[0]
  table = (
    f"load average {load} ({os.cpu_count()} cores)\n\n"
    "| road | seconds | outcome |\n|---|---|---|\n" + "\n".join(rows) + "\n"
  )
  print("\n" + table)
  if os.environ.get("ZOPRIVACY_ROADS_TIMES"):
    with open(os.environ["ZOPRIVACY_ROADS_TIMES"], "w") as f:
      f.write(table)
