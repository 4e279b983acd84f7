r"""Cost of one private step against the zeroth-order floor and DP-SGD.

    python benchmarks/step_cost.py [--quick] [--out benchmarks/results/step_cost.md]

For each model (the digits CNN and a ~4M-parameter MLP) and batch size (64,
256) it times, side by side in one run (round-robin, after warm-up, medians):

* ``floor``: two batched forward passes at ``x +- l u`` plus generating ``u``
  (the least any two-point method can do), for each direction variant;
* ``forward``: one batched forward pass;
* ``mezo`` / ``dpzero`` steps (estimator + SGD update, jitted);
* ``dp_sgd`` step (per-example gradients, clipping, noise, SGD update);

and prints the ratios dpzero/floor, dpzero/mezo and dp_sgd/dpzero, plus the
compiled peak memory (``memory_analysis()``) of a dpzero step, a dp_sgd step
and a forward pass. Direction variants: threefry Gaussian (paper-faithful
default), rbg / unsafe_rbg Gaussian, threefry / rbg Rademacher.

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

import jax
import jax.numpy as jnp
import numpy as np
import optax
from timing import peak_bytes, time_round_robin

import zoprivacy
from zoprivacy import directions, queries
from zoprivacy.models import small

VARIANTS = [  # (label, direction distribution, PRNG implementation)
  ("gaussian/threefry", "gaussian", "threefry"),
  ("gaussian/rbg", "gaussian", "rbg"),
  ("gaussian/unsafe_rbg", "gaussian", "unsafe_rbg"),
  ("rademacher/threefry", "rademacher", "threefry"),
  ("rademacher/rbg", "rademacher", "rbg"),
]


def models():
  return {
    "digits CNN": (
      small.SmallCNN(num_classes=10, features=(8, 16)),
      (8, 8, 1),
    ),
    "wide MLP": (
      small.MLP(num_classes=10, hidden=(2304, 1024)),
      (28, 28, 1),
    ),
  }


def bench(model_name, model, shape, batch_size, reps, min_seconds):
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
    state = tx.init(params)

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

  def make_floor(dist, impl):
    sampler = directions.get_sampler(dist)

    @jax.jit
    def floor(p, key, b):
      # Returning u makes XLA materialize it once, as any step must (it is
      # the update's direction); otherwise the generator may be fused into,
      # and recomputed by, each of its consumers.
      u = sampler(directions.direction_key(key, impl), p)
      return queries.two_point_losses(loss, p, u, 1e-3, b), u

    return floor

  forward = jax.jit(lambda p, b: loss(p, b))
  key = jax.random.key(1)
  fns = {"forward": lambda: forward(params, batch)}
  steps = {}
  for label, dist, impl in VARIANTS:
    fl = make_floor(dist, impl)
    fns[f"floor[{label}]"] = lambda fl=fl: fl(params, key, batch)
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
      clip=1.0, noise_multiplier=1.0, expected_batch_size=batch_size
    )
  )
  fns["dp_sgd"] = lambda: sgd_step(params, sgd_state, batch, mask)

  times = time_round_robin(fns, reps, min_seconds)
  dz_step, dz_state = steps[("dpzero", VARIANTS[0][0])]
  memory = {
    "forward": peak_bytes(forward, params, batch),
    "dpzero": peak_bytes(dz_step, params, dz_state, batch, mask),
    "dp_sgd": peak_bytes(sgd_step, params, sgd_state, batch, mask),
  }
  return num_params, times, memory


def bench_exact_noise(model, shape, dataset_size, batch_size, reps):
  """Seconds per runner step, exact vs float noise, sampler included."""
  from zoprivacy.data import sampling  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(0)
  data = (
    rng.normal(size=(dataset_size,) + shape).astype(np.float32),
    rng.integers(0, 10, size=dataset_size).astype(np.int32),
  )
  params = model.init(jax.random.key(0), jnp.asarray(data[0][:1]))

  def loss(p, b):
    return optax.softmax_cross_entropy_with_integer_labels(
      model.apply(p, b[0]), b[1]
    )

  fns = {}
  for kind in ("float", "exact"):
    est = zoprivacy.dpzero(
      clip=1.0,
      noise_multiplier=1.0,
      smoothing=1e-3,
      expected_batch_size=batch_size,
      dataset_size=dataset_size,
      directions="gaussian",
      exact_noise=kind == "exact",
    )
    tx = optax.chain(est, optax.sgd(1e-3))
    state = tx.init(params)
    plan = zoprivacy.find_plan(state)
    source = zoprivacy.ExactNoiseSource(plan) if kind == "exact" else None
    sampler = sampling.PoissonSampler(dataset_size, batch_size)

    @jax.jit
    def step(p, s, b, z, tx=tx):
      extra = {} if z is None else {"discrete_noise": z}
      u, s = tx.update(
        jax.tree.map(jnp.zeros_like, p),
        s,
        p,
        batched_loss=loss,
        batch=b,
        **extra,
      )
      return optax.apply_updates(p, u), s

    counter = [0]

    def runner_step(
      step=step,
      state=state,
      sampler=sampler,
      source=source,
      counter=counter,
    ):
      t = counter[0] = counter[0] + 1
      batch = sampling.padded_batch(data, sampler.batch_indices(t))
      noise = None if source is None else source.draw(t)
      return step(params, state, batch, noise)

    fns[kind] = runner_step
  return time_min_median(fns, reps)


def time_min_median(fns, reps):
  """(min, median) seconds per call, interleaved, after two warm-up calls."""
  import time  # pylint: disable=g-import-not-at-top

  for f in fns.values():
    jax.block_until_ready(f())
    jax.block_until_ready(f())
  samples = {k: [] for k in fns}
  for _ in range(reps):
    for k, f in fns.items():
      t0 = time.perf_counter()
      jax.block_until_ready(f())
      samples[k].append(time.perf_counter() - t0)
  return {k: (min(v), float(np.median(v))) for k, v in samples.items()}


def exact_noise_section(reps):
  lines = [
    "## Exact discrete noise vs floating-point noise (whole runner step)",
    "",
    f"Machine load (1/5/15 min): {os.getloadavg()}; {reps} "
    "interleaved calls after warm-up; each call samples a secret "
    "Poisson batch, gathers it, draws the integer noise (exact only) "
    "and runs the jitted dpzero + SGD step.",
    "",
    "| setting | float min / median ms | exact min / median ms | "
    "extra per step (median) | ratio (median) | target |",
    "|---|---|---|---|---|---|",
  ]
  cases = [
    ("digits CNN", models()["digits CNN"], 1437, 64, "<= 100 us"),
    ("wide MLP", models()["wide MLP"], 60000, 64, "<= 5%"),
    ("wide MLP", models()["wide MLP"], 60000, 256, "<= 5%"),
  ]
  for name, (model, shape), n, b, target in cases:
    t = bench_exact_noise(model, shape, n, b, reps)
    (f_min, f_med), (e_min, e_med) = t["float"], t["exact"]
    extra, ratio = e_med - f_med, e_med / f_med
    ok = extra <= 100e-6 if target.endswith("us") else ratio <= 1.05
    lines.append(
      f"| {name}, n={n}, batch {b} | {f_min * 1e3:.3f} / "
      f"{f_med * 1e3:.3f} | {e_min * 1e3:.3f} / {e_med * 1e3:.3f} | "
      f"{extra * 1e6:+.0f} us | {ratio:.3f} | {target} "
      f"{'ok' if ok else 'MISSED'} |"
    )
    print(lines[-1], flush=True)
  return lines + [""]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="fewer repetitions")
  parser.add_argument(
    "--exact-noise",
    action="store_true",
    help="only the exact vs float noise section",
  )
  parser.add_argument(
    "--out",
    default=os.path.join(os.path.dirname(__file__), "results", "step_cost.md"),
  )
  args = parser.parse_args()
  reps, min_seconds = (5, 0.5) if args.quick else (21, 3.0)

  lines = [
    "# Step cost: private ZO step vs the two-forward floor and DP-SGD",
    "",
    f"Command: `python benchmarks/step_cost.py{' --quick' if args.quick else ''}`  ",
    f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, "
    f"jax {jax.__version__} on {jax.devices()[0].platform}; "
    f"median of >= {reps} interleaved calls after warm-up.",
    "",
    "floor = generating u once (materialized) plus two batched forward passes at "
    "x +- l u, with the same direction variant as the step it is compared to.",
    "",
  ]
  if args.exact_noise:  # refresh that section of the results file only
    section = exact_noise_section(reps=60 if args.quick else 200)
    old = open(args.out).read().split("\n") if os.path.exists(args.out) else []
    head = "## Exact discrete noise"
    start = next((i for i, l in enumerate(old) if l.startswith(head)), len(old))
    end = next(
      (i for i in range(start + 1, len(old)) if old[i].startswith("## ")),
      len(old),
    )
    section[2] += (
      f" Section refreshed by `python benchmarks/step_cost.py "
      f"--exact-noise{' --quick' if args.quick else ''}`."
    )
    with open(args.out, "w") as f:
      f.write("\n".join(old[:start] + section + old[end:]).rstrip() + "\n")
    print(f"updated {args.out}")
    return
  lines += exact_noise_section(reps=60 if args.quick else 200)
  checks = []
  for model_name, (model, shape) in models().items():
    for batch_size in (64, 256):
      n, t, mem = bench(model_name, model, shape, batch_size, reps, min_seconds)
      default = VARIANTS[0][0]
      checks.append(
        (
          f"{model_name}, batch {batch_size}",
          t[f"dpzero[{default}]"] / t[f"floor[{default}]"],
          t[f"dpzero[{default}]"] / t[f"mezo[{default}]"],
          t["dp_sgd"] / t[f"dpzero[{default}]"],
        )
      )
      lines += [
        f"## {model_name} ({n:,} parameters), batch {batch_size}",
        "",
        f"forward pass: {t['forward'] * 1e3:.3f} ms; dp_sgd step: "
        f"{t['dp_sgd'] * 1e3:.3f} ms",
        "",
        "| directions | floor ms | dpzero ms | dpzero / floor | dpzero / mezo "
        "| dp_sgd / dpzero | floor / forward |",
        "|---|---|---|---|---|---|---|",
      ]
      for label, _, _ in VARIANTS:
        fl, dz, mz = (
          t[f"floor[{label}]"],
          t[f"dpzero[{label}]"],
          t[f"mezo[{label}]"],
        )
        lines.append(
          f"| {label} | {fl * 1e3:.3f} | {dz * 1e3:.3f} | {dz / fl:.3f} | "
          f"{dz / mz:.3f} | {t['dp_sgd'] / dz:.2f} | {fl / t['forward']:.2f} |"
        )
      lines += [
        "",
        "Compiled peak memory (arguments + outputs + temporaries): "
        f"forward {mem['forward'] / 2**20:.2f} MiB, dpzero step "
        f"{mem['dpzero'] / 2**20:.2f} MiB, dp_sgd step "
        f"{mem['dp_sgd'] / 2**20:.2f} MiB "
        f"(dp_sgd / dpzero = {mem['dp_sgd'] / mem['dpzero']:.1f}x).",
        "",
      ]
      print("\n".join(lines[-(len(VARIANTS) + 8) :]), flush=True)
  lines += [
    "## Targets (default directions: Gaussian, threefry)",
    "",
    "| setting | dpzero / floor (target <= 1.3) | dpzero / mezo (target <= 1.03) "
    "| dp_sgd / dpzero |",
    "|---|---|---|---|",
  ]
  for name, to_floor, to_mezo, sgd in checks:
    lines.append(
      f"| {name} | {to_floor:.3f} {'ok' if to_floor <= 1.3 else 'MISSED'} | "
      f"{to_mezo:.3f} {'ok' if to_mezo <= 1.03 else 'MISSED'} | {sgd:.1f} |"
    )
  lines.append("")
  print("\n".join(lines[-(len(checks) + 4) :]))
  os.makedirs(os.path.dirname(args.out), exist_ok=True)
  with open(args.out, "w") as f:
    f.write("\n".join(lines) + "\n")
  print(f"wrote {args.out}")


if __name__ == "__main__":
  main()
