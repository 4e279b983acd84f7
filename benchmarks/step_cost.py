r"""Cost of one private step against the zeroth-order floor and DP-SGD.

    python benchmarks/step_cost.py [--quick] [--out benchmarks/results/step_cost.md]

For each model (the digits CNN and a ~4M-parameter MLP) and batch size (64,
256) it times, side by side in one run (round-robin after warm-up, min and
median, machine load printed):

* ``forward``: one batched forward pass;
* ``update pass``: one donated in-place pass ``p <- a p + b`` over the
  parameters; the floor is two forwards plus the update pass
  (:mod:`floor`);
* ``two_forward``: two batched forward passes at ``x +- l u`` for an
  existing ``u`` and nothing else;
* ``draw``: generating ``u`` alone, for each direction variant (it is part of
  a step's cost, not of the floor);
* ``mezo`` / ``dpzero`` steps (estimator + SGD update, jitted);
* ``dp_sgd`` step (per-example gradients, clipping, noise, SGD update;
  ``--dp-sgd-clipping ghost``: ghost clipping);

(the first row, ``default``, is what ``dpzero`` does with no direction
option: sphere directions, ``direction_prng='auto'``) and reports dpzero
against two forward passes (2 x forward), against the floor and against
``two_forward``, dpzero / mezo, draw / floor and the compiled
peak memory (``memory_analysis()``) of each dpzero variant against the
parameter size, of the floor and of DP-SGD. Direction variants: the
default, Gaussian (auto; threefry, the papers' generator; the first
counter hash; the second, what auto draws with here), sphere (both counter
hashes) and Rademacher (threefry; counter hash).
``--profile`` appends ``step_profile.py``'s breakdown of the counter step.

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
from timing import min_median_round_robin, peak_bytes, runner_keys

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


def bench(model_name, model, shape, batch_size, reps, dp_sgd_clipping):
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(batch_size,) + shape).astype(np.float32))
  y = jnp.asarray(rng.integers(0, 10, size=batch_size).astype(np.int32))
  batch, mask = (x, y), jnp.ones(batch_size, bool)
  params = model.init(jax.random.key(0), x[:1])
  num_params = sum(v.size for v in jax.tree.leaves(params))

  def loss(p, b):
    return optax.softmax_cross_entropy_with_integer_labels(
      model.apply(p, b[0]), b[1]
    )

  def make_step(est):
    tx = optax.chain(est, optax.sgd(1e-3))
    state = runner_keys(tx.init(params))

    @jax.jit
    def step(p, s, b, m):
      u, s = tx.update(
        jax.tree.map(jnp.zeros_like, p),
        s,
        p,
        batched_loss=loss,
        batch=b,
        mask=m,
      )
      return optax.apply_updates(p, u), s

    return step, state

  def make_draw(dist, impl):
    sampler = directions.get_sampler(dist, prng=impl)
    # Returning u materializes it once, as a step must (it is the update's
    # direction): the draw's own cost.
    return jax.jit(lambda p, key: sampler(key, p))

  forward = jax.jit(lambda p, b: loss(p, b))
  # The floor: two forward passes at x +- l u for a u that already exists,
  # and nothing else (no draw, no clip, no noise, no update).
  two_forward = jax.jit(
    lambda p, u, b: queries.two_point_losses(loss, p, u, 1e-3, b)
  )
  key = jax.random.key(1)
  u0 = directions.gaussian(key, params)
  fns = {
    "forward": lambda: forward(params, batch),
    floor.UPDATE: floor.update_pass_call(params),
    "two_forward": lambda: two_forward(params, u0, batch),
  }
  steps = {}
  for label, dist, impl in VARIANTS:
    draw = make_draw(dist, impl)
    fns[f"draw[{label}]"] = lambda draw=draw: draw(params, key)
    for name, est in [
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
    ]:
      step, state = make_step(est)
      steps[(name, label)] = (step, state)
      fns[f"{name}[{label}]"] = lambda step=step, state=state: step(
        params, state, batch, mask
      )
  sgd_step, sgd_state = make_step(
    zoprivacy.dp_sgd(
      clip=1.0,
      noise_multiplier=1.0,
      expected_batch_size=batch_size,
      per_example_clipping=dp_sgd_clipping,
      noise="secure_mode" if dp_sgd_clipping == "ghost" else "exact",
    )
  )
  fns["dp_sgd"] = lambda: sgd_step(params, sgd_state, batch, mask)

  times = min_median_round_robin(fns, reps)
  memory = {
    "forward": peak_bytes(forward, params, batch),
    "two_forward": peak_bytes(two_forward, params, u0, batch),
    "dp_sgd": peak_bytes(sgd_step, params, sgd_state, batch, mask),
  }
  for label, _, _ in VARIANTS:
    dz_step, dz_state = steps[("dpzero", label)]
    memory[f"dpzero[{label}]"] = peak_bytes(
      dz_step, params, dz_state, batch, mask
    )
  param_bytes = sum(v.nbytes for v in jax.tree.leaves(params))
  return num_params, param_bytes, times, memory


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


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="fewer repetitions")
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
    f" --{name.replace('_', '-')} {value!r}"
    if isinstance(value, str)
    else f" --{name.replace('_', '-')}"
    for name, value in vars(args).items()
    if name not in ("out", "quick", "exact_noise")
    and value != parser.get_default(name)
  )
  reps = 5 if args.quick else 21
  device = jax.devices()[0]

  lines = [
    "# Step cost: private ZO step vs two forward passes, MeZO and DP-SGD",
    "",
    f"Command: `python benchmarks/step_cost.py{' --quick' if args.quick else ''}"
    f"{flags}`  ",
    f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, "
    f"device {device.platform} ({device.device_kind}), jax "
    f"{jax.__version__}; load average before the run (1/5/15 min): "
    f"{tuple(round(x, 2) for x in os.getloadavg())}.  ",
    f"Each figure: min / median of {reps} interleaved calls after two "
    "warm-up calls (calls over 1 s, DP-SGD on the wide MLP, 3 calls).",
    "",
    "Lines: `forward` is one batched forward pass; the floor is two "
    "forwards plus one donated in-place pass `p <- a p + b` over the "
    "parameters (what every zeroth-order step must do); `two_forward` is "
    "two batched forward passes at x +- l u for a u that already exists, "
    "nothing else; `draw` is generating u alone (materialized); "
    "`mezo` and `dpzero` are whole jitted steps (direction, two forwards, "
    "clip, noise, SGD update).",
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
      n, param_bytes, t, mem = bench(
        model_name, model, shape, batch_size, reps, args.dp_sgd_clipping
      )
      two, low = t["two_forward"][1], floor.floor_seconds(t)
      lines += [
        f"## {model_name} ({n:,} parameters, {param_bytes / 2**20:.1f} MiB), "
        f"batch {batch_size}",
        "",
        f"forward {_ms(t['forward'])} ms; two_forward "
        f"{_ms(t['two_forward'])} ms; dp_sgd step ({args.dp_sgd_clipping} "
        f"clipping) {_ms(t['dp_sgd'])} ms "
        "(min / median).",
        "",
        floor.floor_text(t),
        "",
        "| directions | draw ms | mezo ms | dpzero ms | draw / floor | "
        "dpzero / floor | dpzero / (2 forward) | dpzero / two_forward | "
        "dpzero / mezo | dpzero peak MiB (x params) |",
        "|---|---|---|---|---|---|---|---|---|---|",
      ]
      for label, _, _ in VARIANTS:
        dr, mz, dz = (t[f"{k}[{label}]"] for k in ("draw", "mezo", "dpzero"))
        peak = mem[f"dpzero[{label}]"]
        lines.append(
          f"| {label} | {_ms(dr)} | {_ms(mz)} | {_ms(dz)} | "
          f"{dr[1] / low:.2f} | {dz[1] / low:.2f} | "
          f"{dz[1] / (2 * t['forward'][1]):.2f} | {dz[1] / two:.2f} | "
          f"{dz[1] / mz[1]:.3f} | "
          f"{peak / 2**20:.1f} ({peak / param_bytes:.2f}x) |"
        )
        checks.append(
          (
            f"{model_name}, batch {batch_size}",
            label,
            dz[1] / (2 * t["forward"][1]),
            dz[1] / low,
            dz[1] / mz[1],
          )
        )
      lines += [
        "",
        "Compiled peak memory (arguments + outputs + temporaries - aliased): "
        f"forward {mem['forward'] / 2**20:.1f} MiB, two_forward "
        f"{mem['two_forward'] / 2**20:.1f} MiB, dp_sgd step "
        f"{mem['dp_sgd'] / 2**20:.1f} MiB.",
        "",
      ]
      print("\n".join(lines[-(len(VARIANTS) + 11) :]), flush=True)
      write_report(args.out, lines)  # what a stopped run has measured
  lines += [
    "## Targets (medians)",
    "",
    "Against two forward passes at the unperturbed parameters (2 x "
    "`forward`): Rademacher <= 1.6, Gaussian or sphere <= 2.0; and "
    "dpzero / mezo <= 1.03. The floor column divides by two plain forward "
    "passes plus one donated update pass over the parameters (`floor.py`): "
    "what any zeroth-order step must do.",
    "",
    "| setting | directions | dpzero / (2 forward) | dpzero / floor | "
    "dpzero / mezo |",
    "|---|---|---|---|---|",
  ]
  for name, label, to_two, to_floor, to_mezo in checks:
    limit = 1.6 if label.startswith("rademacher") else 2.0
    lines.append(
      f"| {name} | {label} | {to_two:.2f} "
      f"{'ok' if to_two <= limit else 'MISSED'} | {to_floor:.2f} | "
      f"{to_mezo:.3f} {'ok' if to_mezo <= 1.03 else 'MISSED'} |"
    )
  lines.append("")
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
