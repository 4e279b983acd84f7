r"""Step time and peak memory against the parameter count and the batch size.

    python benchmarks/scaling.py [--quick] [--out benchmarks/results/scaling.md]

MLPs on 28x28x1 inputs with about 1e5, 1e6 and 1e7 parameters, at batch 16,
64 and 256, side by side in one run (round-robin after warm-up, min and
median, machine load printed), for:

* ``forward``: one batched forward pass (jitted);
* ``dpzero``: the default :func:`zoprivacy.dpzero` (no direction option)
  with SGD, through :func:`zoprivacy.make_step` (parameters and optimizer
  state donated);
* ``ghost dp_sgd``: :func:`zoprivacy.dp_sgd` with ghost clipping, the same
  way.

Peaks are compiled (arguments + outputs + temporaries - aliased). The
growth exponents are least-squares slopes of log(median time) and
log(peak) against log(parameters) at each batch size, and against
log(batch) at each parameter count.
"""

from __future__ import annotations

import argparse
import os
import platform

import jax
import jax.numpy as jnp
import numpy as np
import optax
from results_file import write_report
from timing import min_median_round_robin, peak_bytes

import zoprivacy
from zoprivacy.models import small

# Hidden widths: about 1e5, 1e6 and 1e7 parameters on a 784-wide input.
WIDTHS = {"1e5": (128,), "1e6": (1024, 256), "1e7": (4096, 1536)}
BATCHES = (16, 64, 256)


def setting(hidden, batch_size):
  """``(params, batch, loss, {name: (jitted, args)})`` of one setting."""
  model = small.MLP(num_classes=10, hidden=hidden)
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(batch_size, 28, 28, 1)).astype(np.float32))
  y = jnp.asarray(rng.integers(0, 10, size=batch_size).astype(np.int32))
  params = model.init(jax.random.key(0), x[:1])

  def loss(p, b):
    logits = model.apply(p, b[0])
    return optax.softmax_cross_entropy_with_integer_labels(logits, b[1])

  common = dict(clip=1.0, noise_multiplier=1.0, expected_batch_size=batch_size)
  estimators = {
    "dpzero": zoprivacy.dpzero(smoothing=1e-3, **common),
    "ghost dp_sgd": zoprivacy.dp_sgd(
      per_example_clipping="ghost", noise="secure_mode", **common
    ),
  }
  steps = {"forward": (jax.jit(loss), (params, (x, y)))}
  for name, est in estimators.items():
    tx = optax.chain(est, optax.sgd(1e-3))
    steps[name] = (zoprivacy.make_step(tx, loss), (params, tx.init(params)))
  return params, (x, y), steps


def donated(step, params, state, batch):
  """A call that steps its own copy of the (donated) params and state."""
  held = [jax.tree.map(jnp.copy, params), jax.tree.map(jnp.copy, state)]

  def call():
    held[0], held[1] = step(held[0], held[1], batch)
    return held[0]

  return call


def measure(hidden, batch_size, reps):
  params, batch, steps = setting(hidden, batch_size)
  fns, peaks = {}, {}
  for name, (fn, args) in steps.items():
    if name == "forward":
      peaks[name] = peak_bytes(fn, *args)
      fns[name] = lambda fn=fn, args=args: fn(*args)
    else:
      peaks[name] = peak_bytes(fn, *args, batch)
      fns[name] = donated(fn, *args, batch)
  times = min_median_round_robin(fns, reps)
  num = sum(v.size for v in jax.tree.leaves(params))
  nbytes = sum(v.nbytes for v in jax.tree.leaves(params))
  return num, nbytes, times, peaks


def slope(xs, ys) -> float:
  """Least-squares slope of log(ys) against log(xs)."""
  return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


METHODS = ("forward", "dpzero", "ghost dp_sgd")


def exponent_lines(results, sizes, batches):
  lines = [
    "## Growth exponents",
    "",
    "Slopes of log(median time) and log(peak) against log(parameters) at "
    "each batch size, and against log(batch) at each parameter count.",
    "",
    "| against | at | "
    + " | ".join(f"{m} time | {m} peak" for m in METHODS)
    + " |",
    "|---|---|" + "---|" * (2 * len(METHODS)),
  ]
  for b in batches:
    xs = [results[(s, b)][0] for s in sizes]
    cells = []
    for m in METHODS:
      cells.append(
        f"{slope(xs, [results[(s, b)][2][m][1] for s in sizes]):.2f}"
      )
      cells.append(f"{slope(xs, [results[(s, b)][3][m] for s in sizes]):.2f}")
    lines.append(f"| parameters | batch {b} | " + " | ".join(cells) + " |")
  for s in sizes:
    cells = []
    for m in METHODS:
      cells.append(
        f"{slope(batches, [results[(s, b)][2][m][1] for b in batches]):.2f}"
      )
      cells.append(
        f"{slope(batches, [results[(s, b)][3][m] for b in batches]):.2f}"
      )
    lines.append(f"| batch | {s} parameters | " + " | ".join(cells) + " |")
  return lines + [""]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="3 calls each")
  parser.add_argument("--reps", type=int, default=None)
  parser.add_argument(
    "--out",
    default=os.path.join(os.path.dirname(__file__), "results", "scaling.md"),
  )
  args = parser.parse_args()
  reps = args.reps or (3 if args.quick else 15)
  device = jax.devices()[0]
  lines = [
    "# Scaling: step time and peak against parameters and batch",
    "",
    f"Command: `python benchmarks/scaling.py{' --quick' if args.quick else ''}`"
    "  ",
    f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, device "
    f"{device.platform} ({device.device_kind}), jax {jax.__version__}; load "
    f"before the run (1/5/15 min): {tuple(round(x, 2) for x in os.getloadavg())}."
    "  ",
    f"Each time: min / median ms of {reps} interleaved calls of one "
    "setting after two warm-up calls; `dpzero` is the default dpzero "
    "(sphere, `direction_prng='auto'`) and `ghost dp_sgd` ghost-clipping "
    "DP-SGD, each an SGD step from `zoprivacy.make_step` (donated). Peak: "
    "compiled, in MiB and (x the parameters).",
    "",
    "| parameters | batch | forward ms | dpzero ms | ghost dp_sgd ms | "
    "dpzero / (2 forward) | ghost / dpzero | forward peak | dpzero peak | "
    "ghost peak | load after |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  results = {}
  for size, hidden in WIDTHS.items():
    for b in BATCHES:
      num, nbytes, t, peak = measure(hidden, b, reps)
      results[(size, b)] = (num, nbytes, t, peak)
      ms = {m: f"{t[m][0] * 1e3:.2f} / {t[m][1] * 1e3:.2f}" for m in METHODS}
      mib = {
        m: f"{peak[m] / 2**20:.1f} ({peak[m] / nbytes:.2f}x)" for m in METHODS
      }
      lines.append(
        f"| {num:,} | {b} | {ms['forward']} | {ms['dpzero']} | "
        f"{ms['ghost dp_sgd']} | "
        f"{t['dpzero'][1] / (2 * t['forward'][1]):.2f} | "
        f"{t['ghost dp_sgd'][1] / t['dpzero'][1]:.2f} | {mib['forward']} | "
        f"{mib['dpzero']} | {mib['ghost dp_sgd']} | "
        f"{tuple(round(x, 1) for x in os.getloadavg())} |"
      )
      print(lines[-1], flush=True)
      write_report(args.out, lines)  # what a stopped run has measured
  lines.append("")
  sizes = list(WIDTHS)
  lines += exponent_lines(results, sizes, list(BATCHES))
  print("\n".join(lines[-(len(BATCHES) + len(sizes) + 6) :]))
  write_report(args.out, lines)
  print(f"wrote {args.out}")


if __name__ == "__main__":
  main()
