"""Exact discrete noise against floating-point noise: a whole runner step.

Part of ``python benchmarks/step_cost.py`` (and ``--exact-noise`` alone):
secret Poisson sampling, gathering the padded batch, drawing the integer
noise on the host (exact noise only) and the jitted dpzero + SGD update,
min and median of interleaved calls.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
from timing import min_median_round_robin

import zoprivacy
from zoprivacy.data import sampling
from zoprivacy.models import small


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


def bench_exact_noise(model, shape, dataset_size, batch_size, reps):
  """Seconds per runner step, exact vs float noise, sampler included."""

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
  # float: noise="float"; exact: the runner draws the noise and passes it;
  # default: the plain update draws it itself (io_callback).
  for kind in ("float", "exact", "default"):
    est = zoprivacy.dpzero(
      clip=1.0,
      noise_multiplier=1.0,
      smoothing=1e-3,
      expected_batch_size=batch_size,
      dataset_size=dataset_size,
      directions="gaussian",
      noise="float" if kind == "float" else "exact",
    )
    tx = optax.chain(est, optax.sgd(1e-3))
    state = zoprivacy.init(tx, params)
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
  return min_median_round_robin(fns, reps, slow_call_seconds=float("inf"))


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
    "extra per step (median) | ratio (median) | target | "
    "default (in-update callback) min / median ms, ratio |",
    "|---|---|---|---|---|---|---|",
  ]
  cases = [
    ("digits CNN", models()["digits CNN"], 1437, 64, "<= 100 us"),
    ("wide MLP", models()["wide MLP"], 60000, 64, "<= 5%"),
    ("wide MLP", models()["wide MLP"], 60000, 256, "<= 5%"),
  ]
  for name, (model, shape), n, b, target in cases:
    t = bench_exact_noise(model, shape, n, b, reps)
    (f_min, f_med), (e_min, e_med) = t["float"], t["exact"]
    d_min, d_med = t["default"]
    extra, ratio = e_med - f_med, e_med / f_med
    ok = extra <= 100e-6 if target.endswith("us") else ratio <= 1.05
    lines.append(
      f"| {name}, n={n}, batch {b} | {f_min * 1e3:.3f} / "
      f"{f_med * 1e3:.3f} | {e_min * 1e3:.3f} / {e_med * 1e3:.3f} | "
      f"{extra * 1e6:+.0f} us | {ratio:.3f} | {target} "
      f"{'ok' if ok else 'MISSED'} | {d_min * 1e3:.3f} / "
      f"{d_med * 1e3:.3f}, {d_med / f_med:.3f} |"
    )
    print(lines[-1], flush=True)
  return lines + [""]
