r"""Cost of one private step against the zeroth-order floor and DP-SGD.

    python benchmarks/step_cost.py [--quick] [--out benchmarks/results/step_cost.md]

For each model (the digits CNN and a ~4M-parameter MLP) and batch size (64,
256) it times, in one run, each call right after a call of the floor (floor,
a, floor, b, ... each round, after warm-up; min and median, machine load
printed):

* ``floor``: one compiled program holding two plain forward passes and one
  donated in-place pass over the parameters (:mod:`floor`): what any
  zeroth-order step must do, compiled and called as a step is;
* ``forward``: one batched forward pass called alone (for comparison);
* ``two_forward``: two batched forward passes at ``x +- l u`` for an
  existing ``u`` and nothing else;
* ``draw``: generating ``u`` alone, for each direction variant (it is part of
  a step's cost, not of the floor);
* ``mezo`` / ``dpzero`` steps (estimator + SGD update, ``make_step``:
  jitted, parameters and state donated, as a user runs them);
* ``dp_sgd`` step (per-example gradients, clipping, noise, SGD update;
  ``--dp-sgd-clipping ghost``: ghost clipping);

(the first row, ``default``, is what ``dpzero`` does with no direction
option: sphere directions, ``direction_prng='auto'``, exact noise drawn by
the update itself) and reports dpzero and the draw against the floor (the
median over calls of each call's time over the floor call just before it),
dpzero against ``two_forward`` and against mezo, and the compiled peak
memory (``memory_analysis()``) of each dpzero variant against the
parameter size, of the floor and of DP-SGD. Direction variants: the
default, Gaussian (auto; threefry, the papers' generator; the first
counter hash; the second, what auto draws with here), sphere (both counter
hashes) and Rademacher (threefry; counter hash).
``--profile`` appends ``step_profile.py``'s breakdown of the default step.

``--exact-noise`` (also part of the full run) times the runner's whole step
with exact discrete noise against the same step with floating-point noise:
secret Poisson sampling, gathering the padded batch, drawing the integer
noise on the host (exact noise only) and the jitted update, min and median
of interleaved calls.
"""

from __future__ import annotations

import argparse
import os
import platform

import floor
import jax
import jax.numpy as jnp
import numpy as np
import optax
from exact_noise_cost import exact_noise_section, models
from results_file import replace_section, write_report
from timing import compiled_peak, paired_round_robin, peak_bytes

import zoprivacy
from zoprivacy.zo import directions, queries

VARIANTS = [  # (label, direction distribution, PRNG implementation)
  ("default: sphere/auto", "sphere", "auto"),  # dpzero with no option
  ("gaussian/auto", "gaussian", "auto"),
  ("gaussian/threefry", "gaussian", "threefry"),
  ("gaussian/counter", "gaussian", "counter"),
  ("sphere/counter", "sphere", "counter"),
  ("gaussian/counter2", "gaussian", "counter2"),
  ("sphere/counter2", "sphere", "counter2"),
  ("rademacher/threefry", "rademacher", "threefry"),
  ("rademacher/counter", "rademacher", "counter"),
]
DEFAULT = VARIANTS[0][0]


def _ms(min_median) -> str:
  return f"{min_median[0] * 1e3:.2f} / {min_median[1] * 1e3:.2f}"


# The targets for the default step against its floor (medians).
FLOOR_TARGETS = {64: 2.0, 256: 1.5}


def _task(model, shape, batch_size):
  """``(loss, params, batch, mask)``: random inputs, 10 classes."""
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(batch_size,) + shape).astype(np.float32))
  y = jnp.asarray(rng.integers(0, 10, size=batch_size).astype(np.int32))
  params = model.init(jax.random.key(0), x[:1])

  def loss(p, b):
    return optax.softmax_cross_entropy_with_integer_labels(
      model.apply(p, b[0]), b[1]
    )

  return loss, params, (x, y), jnp.ones(batch_size, bool)


def _donated_step(est, loss, params, batch, mask):
  """``(call, step, state)``: ``make_step``'s jitted step (estimator + SGD,
  parameters and state donated, as a user runs it) and a zero-argument
  call of it that carries its own copy of the parameters and state."""
  tx = optax.chain(est, optax.sgd(1e-3))
  step, state = zoprivacy.make_step(tx, loss), tx.init(params)
  held = [jax.tree.map(jnp.copy, params), jax.tree.map(jnp.copy, state)]

  def call():
    held[0], held[1] = step(held[0], held[1], batch, mask)
    return held[0]

  return call, step, state


def _zo_estimators(dist, impl, batch_size):
  """``[(name, estimator)]``: mezo and dpzero with these directions."""
  return [
    (
      "mezo",
      zoprivacy.mezo(smoothing=1e-3, directions=dist, direction_prng=impl),
    ),
    (
      "dpzero",
      zoprivacy.dpzero(
        clip=1.0,
        noise_multiplier=1.0,
        smoothing=1e-3,
        expected_batch_size=batch_size,
        directions=dist,
        direction_prng=impl,
      ),
    ),
  ]


def bench(model, shape, batch_size, reps, dp_sgd_clipping):
  """``(num_params, param_bytes, Paired times, memory)`` of one setting,
  every call timed right after a floor call."""
  loss, params, batch, mask = _task(model, shape, batch_size)
  fns = floor.floor_calls(loss, params, batch)
  # Two forward passes at x +- l u for a u that already exists, nothing else.
  two_forward = jax.jit(
    lambda p, u, b: queries.two_point_losses(loss, p, u, 1e-3, b)
  )
  key = jax.random.key(1)
  u0 = directions.gaussian(key, params)
  fns["two_forward"] = lambda: two_forward(params, u0, batch)
  steps = {}
  for label, dist, impl in VARIANTS:
    sampler = directions.get_sampler(dist, prng=impl)
    # Returning u materializes it once: the draw's own cost.
    draw = jax.jit(lambda p, k, sampler=sampler: sampler(k, p))
    fns[f"draw[{label}]"] = lambda draw=draw: draw(params, key)
    for name, est in _zo_estimators(dist, impl, batch_size):
      call, *steps[(name, label)] = _donated_step(
        est, loss, params, batch, mask
      )
      fns[f"{name}[{label}]"] = call
  fns["dp_sgd"], sgd_step, sgd_state = _donated_step(
    zoprivacy.dp_sgd(
      clip=1.0,
      noise_multiplier=1.0,
      expected_batch_size=batch_size,
      per_example_clipping=dp_sgd_clipping,
      noise="secure_mode" if dp_sgd_clipping == "ghost" else "exact",
    ),
    loss,
    params,
    batch,
    mask,
  )

  paired = paired_round_robin(floor.FLOOR, fns, reps)
  memory = {
    floor.FLOOR: compiled_peak(
      floor.floor_lowered(loss, params, batch).compile()
    ),
    "two_forward": peak_bytes(two_forward, params, u0, batch),
    "dp_sgd": peak_bytes(sgd_step, params, sgd_state, batch, mask),
  }
  for label, _, _ in VARIANTS:
    dz_step, dz_state = steps[("dpzero", label)]
    memory[f"dpzero[{label}]"] = peak_bytes(
      dz_step, params, dz_state, batch, mask
    )
  num_params = sum(v.size for v in jax.tree.leaves(params))
  param_bytes = sum(v.nbytes for v in jax.tree.leaves(params))
  return num_params, param_bytes, paired, memory


def setting_lines(title, paired, memory, param_bytes, dp_sgd_clipping):
  """One setting's section: its lines and its rows for the targets."""
  t, ratio = paired.times, paired.ratios
  lines = [
    f"## {title}",
    "",
    f"two_forward {_ms(t['two_forward'])} ms; dp_sgd step ({dp_sgd_clipping} "
    f"clipping) {_ms(t['dp_sgd'])} ms, {ratio['dp_sgd']:.2f}x the floor "
    "(min / median).",
    "",
    floor.floor_text(t),
    "",
    "| directions | draw ms | mezo ms | dpzero ms | draw / floor | "
    "dpzero / floor (CPU) | dpzero / two_forward | dpzero / mezo | "
    "dpzero peak MiB (x params) |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  checks = []
  for label, _, _ in VARIANTS:
    dr, mz, dz = (f"{k}[{label}]" for k in ("draw", "mezo", "dpzero"))
    peak = memory[dz]
    to_mezo = t[dz][1] / t[mz][1]
    lines.append(
      f"| {label} | {_ms(t[dr])} | {_ms(t[mz])} | {_ms(t[dz])} | "
      f"{ratio[dr]:.2f} | {ratio[dz]:.2f} ({paired.cpu_ratios[dz]:.2f}) | "
      f"{t[dz][1] / t['two_forward'][1]:.2f} | {to_mezo:.3f} | "
      f"{peak / 2**20:.1f} ({peak / param_bytes:.2f}x) |"
    )
    by_min = t[dz][0] / floor.floor_seconds(t, 0)
    checks.append((label, ratio[dz], paired.cpu_ratios[dz], by_min, to_mezo))
  lines += [
    "",
    "Compiled peak memory (arguments + outputs + temporaries - aliased): "
    f"floor {memory[floor.FLOOR] / 2**20:.1f} MiB, two_forward "
    f"{memory['two_forward'] / 2**20:.1f} MiB, dp_sgd step "
    f"{memory['dp_sgd'] / 2**20:.1f} MiB.",
    "",
  ]
  return lines, checks


def target_lines(checks):
  """The targets table from ``[(setting, batch, label, paired wall,
  paired CPU, by min, to mezo)]``; a target is met where both the wall
  and the CPU ratio meet it."""
  lines = [
    "## Targets",
    "",
    "dpzero against its floor (`floor.py`: two plain forwards and one "
    "donated update pass, one program): the median over calls of each "
    "step call's time over the floor call just before it, in wall time "
    "and in this process's CPU time, and min over min (wall): <= 2.0 at "
    "batch 64 and <= 1.5 at batch 256, met where both medians meet it "
    "(the default row is what the targets are set for); dpzero / mezo "
    "<= 1.03 (wall medians).",
    "",
    "| setting | directions | dpzero / floor, wall | CPU | min / min | "
    "target | dpzero / mezo |",
    "|---|---|---|---|---|---|---|",
  ]
  for name, batch_size, label, wall, cpu, by_min, to_mezo in checks:
    limit = FLOOR_TARGETS.get(batch_size)
    ok = limit is not None and max(wall, cpu) <= limit
    verdict = "" if limit is None else "ok" if ok else "MISSED"
    lines.append(
      f"| {name} | {label} | {wall:.2f} | {cpu:.2f} | {by_min:.2f} | "
      f"{'' if limit is None else f'<= {limit}'} {verdict} | "
      f"{to_mezo:.3f} {'ok' if to_mezo <= 1.03 else 'MISSED'} |"
    )
  return lines + [""]


def sharded_section(reps):
  """``sharded_step.py`` in its own process (8 simulated devices)."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top

  here = os.path.dirname(os.path.abspath(__file__))
  out = subprocess.run(
    [sys.executable, os.path.join(here, "sharded_step.py"), str(reps)],
    capture_output=True,
    text=True,
    check=True,
    cwd=here,
  ).stdout
  table = [line for line in out.splitlines() if line.startswith("|")]
  print("\n".join(table), flush=True)
  return [
    "## Sharded: dpzero on 8 simulated devices (data=8) against one",
    "",
    "`python benchmarks/sharded_step.py`: the same step placed as the runner "
    "places it. The 8 simulated devices share this machine's cores and each "
    "regenerates the whole direction, so this measures the overhead of "
    "partitioning, not a speed-up.",
    "",
    *table,
    "",
  ]


def _load():
  return tuple(round(x, 2) for x in os.getloadavg())


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="fewer repetitions")
  parser.add_argument("--reps", type=int, default=None, help="rounds (21)")
  parser.add_argument(
    "--exact-noise",
    action="store_true",
    help="only the exact vs float noise section",
  )
  parser.add_argument(
    "--models",
    default=",".join(models()),
    help="comma-separated subset of: " + ", ".join(models()),
  )
  parser.add_argument("--batch-sizes", default="64,256")
  parser.add_argument(
    "--dp-sgd-clipping",
    choices=("explicit", "ghost"),
    default="explicit",
    help="the DP-SGD line's per-example clipping (ghost compiles in "
    "seconds on a GPU, where explicit per-example gradients of the wide "
    "MLP take minutes)",
  )
  parser.add_argument(
    "--skip-exact-noise", action="store_true", help="no exact noise section"
  )
  parser.add_argument(
    "--skip-sharded", action="store_true", help="no sharded section"
  )
  parser.add_argument(
    "--profile", action="store_true", help="append step_profile.py's table"
  )
  parser.add_argument(
    "--out",
    default=os.path.join(os.path.dirname(__file__), "results", "step_cost.md"),
  )
  args = parser.parse_args()
  flags = "".join(
    f" --{name.replace('_', '-')}" + ("" if value is True else f" {value!r}")
    for name, value in vars(args).items()
    if name not in ("out", "quick", "exact_noise")
    and value != parser.get_default(name)
  )
  reps = args.reps or (5 if args.quick else 21)
  device = jax.devices()[0]

  lines = [
    "# Step cost: private ZO step vs its floor, MeZO and DP-SGD",
    "",
    f"Command: `python benchmarks/step_cost.py{' --quick' if args.quick else ''}"
    f"{flags}`  ",
    f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, "
    f"device {device.platform} ({device.device_kind}), jax "
    f"{jax.__version__}; load average before the run (1/5/15 min): "
    f"{tuple(round(x, 2) for x in os.getloadavg())}.  ",
    f"Each figure: min / median of {reps} calls, each right after a call "
    "of the floor (floor, a, floor, b, ... each round), after two warm-up "
    "calls (calls over 1 s, DP-SGD on the wide MLP, 3 calls).",
    "",
    "Lines: the floor is one compiled program holding two plain forward "
    "passes and one donated in-place pass `p <- a p + b g` over the "
    "parameters (`floor.py`: what every zeroth-order step must do, "
    "compiled and called as a step is; no draw, no perturbation, no "
    "clipping or noise); each other call is timed right after a floor "
    "call, and `/ floor` is the median over its calls of its time over "
    "that floor call's. `forward` is one batched forward pass called "
    "alone; `two_forward` is two batched forward passes at x +- l u for "
    "a u that already exists, nothing else; `draw` is generating u alone "
    "(materialized); `mezo` and `dpzero` are whole steps (direction, "
    "two forwards, clip, noise, SGD update) as `make_step` jits them, "
    "parameters and state donated.",
    "",
  ]
  if args.exact_noise:  # refresh that section of the results file only
    section = exact_noise_section(reps=60 if args.quick else 200)
    section[2] += (
      f" Section refreshed by `python benchmarks/step_cost.py "
      f"--exact-noise{' --quick' if args.quick else ''}`."
    )
    replace_section(args.out, section[0], section)
    print(f"updated {args.out}")
    return
  checks = []
  chosen = args.models.split(",")
  for model_name, (model, shape) in models().items():
    if model_name not in chosen:
      continue
    for batch_size in map(int, args.batch_sizes.split(",")):
      n, param_bytes, paired, mem = bench(
        model, shape, batch_size, reps, args.dp_sgd_clipping
      )
      title = (
        f"{model_name} ({n:,} parameters, {param_bytes / 2**20:.1f} MiB), "
        f"batch {batch_size}"
      )
      section, rows = setting_lines(
        title, paired, mem, param_bytes, args.dp_sgd_clipping
      )
      lines += section + [f"Load after: {_load()}.", ""]
      name = f"{model_name}, batch {batch_size}"
      checks += [(name, batch_size, *row) for row in rows]
      print("\n".join(section), flush=True)
      write_report(args.out, lines)  # what a stopped run has measured
  lines += target_lines(checks)
  print("\n".join(lines[-(len(checks) + 8) :]))
  if device.platform == "cpu" and not args.skip_sharded:  # simulated CPUs
    lines += sharded_section(reps)
  if args.profile:
    from step_profile import profile_section  # pylint: disable=g-import-not-at-top

    lines += profile_section(reps)
  if not args.skip_exact_noise:
    lines += exact_noise_section(reps=60 if args.quick else 200)
  write_report(args.out, lines)
  print(f"wrote {args.out}")


if __name__ == "__main__":
  main()
