"""How the PAZO Table 1 analog set its budget: runtime probes and the
non-private learning curves on public data that fix the step count."""

from __future__ import annotations

import os
import time

from experiments.reproductions import pazo_table1_report as report
from experiments.reproductions.pazo_table1 import (
  BUDGETS,
  EPSILONS,
  METHODS,
  _config,
  compilation_cache,
  make_config,
)
from experiments.run import train


def estimate(mode: str = "full", methods=None, probe_steps=(10, 110)) -> dict:
  """Times three short selection runs per method (first compile, cached
  overhead, per-step cost) and predicts the command's runtime with an
  empty compilation cache. Returns seconds per method."""
  import tempfile  # pylint: disable=g-import-not-at-top

  budget = BUDGETS[mode]
  methods = tuple(methods or METHODS)
  compilation_cache(tempfile.mkdtemp(prefix="pazo_table1_jax_"))
  total = {}
  for m in methods:
    lr = METHODS[m][2][0]
    t = []
    for seed, steps in (
      (0, probe_steps[0]),
      (1, probe_steps[0]),
      (2, probe_steps[1]),
    ):
      c = make_config(m, 1.0, lr, seed, budget, True, steps)
      start = time.time()
      train.train(c, progress=False)
      t.append(time.time() - start)
    per_step = max(t[2] - t[1], 0.0) / (probe_steps[1] - probe_steps[0])
    overhead = max(t[1] - probe_steps[0] * per_step, 0.0)
    compile_s = max(t[0] - t[1], 0.0)
    compiles = len(EPSILONS) * len(METHODS[m][2])
    runs = compiles + len(EPSILONS) * len(budget.seeds)
    steps = (
      compiles * budget.selection_steps
      + len(EPSILONS) * len(budget.seeds) * budget.num_steps
    )
    total[m] = compiles * compile_s + runs * overhead + steps * per_step
    print(
      f"{m:9s} compile {compile_s:4.1f} s, overhead {overhead:4.1f} s, "
      f"{1e3 * per_step:5.1f} ms/step, {runs} runs: "
      f"{total[m] / 60:5.1f} min",
      flush=True,
    )
  print(
    f"total: {sum(total.values()) / 60:.1f} min for {mode} "
    f"({budget.num_steps} steps per run)",
    flush=True,
  )
  return total


# Non-private learning curves on public data, for the step budget.
CURVE_RUNS = (("MeZO", 1e-3), ("MeZO", 3e-3), ("DP-SGD", 0.1), ("DP-SGD", 0.3))
CURVE_EPSILON = 100.0  # DP-SGD cannot run without noise: a proxy


def curve(
  out: str, mode: str = "full", steps: int = 1500, every: int = 100
) -> dict:
  """Accuracy vs steps on public-validation, training on public-train:
  MeZO (non-private) and DP-SGD at epsilon 100 (its noise calibrated for
  public-train's sampling rate), seed 0. Writes ``curve.md``/``curve.png``."""

  budget = BUDGETS[mode]
  compilation_cache(os.path.join(out, "jax_cache"))
  curves = {}
  for method, lr in CURVE_RUNS:
    c = _config(method, lr, 0, budget, True, steps)
    if method != "MeZO":
      c.privacy.target_epsilon = CURVE_EPSILON
    c.eval_every = every
    r = train.train(c, progress=False)
    name = f"{method} lr {lr:g}"
    curves[name] = [(h["step"], h["test_accuracy"]) for h in r["history"]]
    print(name, " ".join(f"{s}:{a:.3f}" for s, a in curves[name]), flush=True)
  report.write_curve(out, curves, budget, CURVE_EPSILON)
  return curves


def mezo_plateau(
  workdir: str, lr: float = 1e-3, steps: int = 6000, every: int = 250
) -> list[tuple[int, float]]:
  """Non-private MeZO on public-train past the table's 600 steps, evaluated
  on public-validation every ``every`` steps (the curve's setting, seed 0).
  ``workdir`` holds its metrics and checkpoints: a rerun resumes."""

  c = _config("MeZO", lr, 0, BUDGETS["full"], True, steps)
  c.eval_every, c.checkpoint_every, c.workdir = every, 1000, workdir
  r = train.train(c, progress=False)
  return [(h["step"], h["test_accuracy"]) for h in r["history"]]


if __name__ == "__main__":
  import argparse  # pylint: disable=g-import-not-at-top

  parser = argparse.ArgumentParser(
    description="MeZO's learning curve on public data, to its plateau."
  )
  parser.add_argument("--workdir", default="results/pazo_table1/mezo_plateau")
  parser.add_argument("--lr", type=float, default=1e-3)
  parser.add_argument("--steps", type=int, default=6000)
  parser.add_argument("--every", type=int, default=250)
  args = parser.parse_args()
  for step, accuracy in mezo_plateau(
    args.workdir, args.lr, args.steps, args.every
  ):
    print(f"{step}\t{100 * accuracy:.1f}")
