r"""Seconds per iteration relative to DP-SGD: the analog of PAZO Table 5.

    python benchmarks/pazo_step_time.py [--quick] [--models cnn,nf_resnet18]

Times one jitted training step (estimator + SGD update) of every method on
the same model and batch, interleaved round-robin in one run, and prints the
median time of each as a ratio to DP-SGD's. Batch 64 private examples, 64
public examples per public batch, q = 1 query, k = 4 public batches for
PAZO-P/P'/S, k = 8 anchor bases for GEP (PAZO's settings, App. C).

PAZO Table 5 reports, for CIFAR-10 / NF-ResNet18 on a GPU, PAZO-M 8.2x
faster than DP-SGD per iteration. The ratio depends on how much per-example
gradients cost relative to forward passes on the hardware at hand.
"""

from __future__ import annotations

import argparse
import os
import platform

import jax
import jax.numpy as jnp
import numpy as np
import optax
from timing import time_round_robin

import zoprivacy
from zoprivacy.models import nf_resnet, small

BATCH = 64
PUBLIC_BATCH = 64
K = 4

METHODS = {  # name -> (factory kwargs, extra argument carrying public data)
  "dp_sgd": (dict(clip=1.0), None),
  "dpzero": (dict(clip=1.0, smoothing=1e-3, directions="gaussian"), None),
  "pazo_m": (dict(clip=1.0, smoothing=1e-3, alpha=0.5), "public_batch"),
  "pazo_p": (
    dict(clip=1.0, smoothing=1e-3, num_public_batches=K),
    "public_batches",
  ),
  "pazo_p_prime": (
    dict(clip=1.0, smoothing=1e-3, num_public_batches=K, orthonormalize=False),
    "public_batches",
  ),
  "pazo_s": (
    dict(
      clip=1.0,
      learning_rate=0.1,
      num_public_batches=K,
      candidate_noise_scale=0.01,
    ),
    "public_batches",
  ),
  "dpmd": (dict(clip=1.0, num_steps=1000), "public_batch"),
  "dope_sgd": (dict(clip=1.0), "public_batch"),
  "gep": (
    dict(embedding_clip=1.0, residual_clip=1.0, num_bases=8),
    "public_batch",
  ),
}


def models():
  return {
    "cnn": (small.SmallCNN(num_classes=10, features=(8, 16)), (28, 28, 1)),
    "nf_resnet18": (nf_resnet.nf_resnet18(num_classes=10), (32, 32, 3)),
  }


def bench_model(model, shape, reps, min_seconds, methods):
  rng = np.random.default_rng(0)
  make = lambda n: (
    jnp.asarray(rng.normal(size=(n,) + shape), jnp.float32),
    jnp.asarray(rng.integers(0, 10, size=n), jnp.int32),
  )
  batch, mask = make(BATCH), jnp.ones(BATCH, bool)
  public = make(PUBLIC_BATCH)
  publics = jax.tree.map(
    lambda *xs: jnp.stack(xs), *[make(PUBLIC_BATCH) for _ in range(K)]
  )
  params = model.init(jax.random.key(0), batch[0][:1])

  def loss(p, b):
    return optax.softmax_cross_entropy_with_integer_labels(
      model.apply(p, b[0]), b[1]
    )

  fns = {}
  for name in methods:
    kwargs, public_arg = METHODS[name]
    factory = zoprivacy.ESTIMATORS["pazo_p" if name == "pazo_p_prime" else name]
    est = factory(noise_multiplier=1.0, expected_batch_size=BATCH, **kwargs)
    tx = optax.chain(est, optax.sgd(1e-3))
    state = zoprivacy.init(tx, params)
    extra = (
      {}
      if public_arg is None
      else {public_arg: publics if public_arg == "public_batches" else public}
    )

    @jax.jit
    def step(p, s, b, m, extra, tx=tx):
      u, s = tx.update(
        jax.tree.map(jnp.zeros_like, p),
        s,
        p,
        batched_loss=loss,
        batch=b,
        mask=m,
        **extra,
      )
      return optax.apply_updates(p, u), s

    fns[name] = lambda step=step, state=state, extra=extra: step(
      params, state, batch, mask, extra
    )
  num_params = sum(v.size for v in jax.tree.leaves(params))
  return num_params, time_round_robin(
    fns, reps, min_seconds, slow_call_seconds=5.0
  )


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--models", default="cnn,nf_resnet18")
  parser.add_argument("--methods", default=",".join(METHODS))
  parser.add_argument(
    "--out",
    default=os.path.join(
      os.path.dirname(__file__), "results", "pazo_step_time.md"
    ),
  )
  args = parser.parse_args()
  reps, min_seconds = (3, 0.0) if args.quick else (7, 2.0)
  methods = args.methods.split(",")
  lines = [
    "# Seconds per iteration relative to DP-SGD (PAZO Table 5 analog)",
    "",
    f"Command: `python benchmarks/pazo_step_time.py{' --quick' if args.quick else ''}"
    f" --models {args.models}`  ",
    f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, jax "
    f"{jax.__version__} on {jax.devices()[0].platform}; private batch {BATCH}, "
    f"public batch {PUBLIC_BATCH}, k = {K}, q = 1; median of interleaved calls "
    "after warm-up.",
    "",
    "PAZO Table 5 (CIFAR-10, NF-ResNet18, GPU): PAZO-M is 8.2x faster per "
    "iteration than DP-SGD.",
    "",
  ]
  for model_name in args.models.split(","):
    model, shape = models()[model_name]
    n, t = bench_model(model, shape, reps, min_seconds, methods)
    lines += [
      f"## {model_name} ({n:,} parameters)",
      "",
      "| method | ms / iteration | time / DP-SGD | DP-SGD / time |",
      "|---|---|---|---|",
    ]
    for name in methods:
      lines.append(
        f"| {name} | {t[name] * 1e3:.1f} | {t[name] / t['dp_sgd']:.3f} | "
        f"{t['dp_sgd'] / t[name]:.2f}x |"
      )
    lines.append("")
    print("\n".join(lines[-(len(methods) + 4) :]), flush=True)
  os.makedirs(os.path.dirname(args.out), exist_ok=True)
  with open(args.out, "w") as f:
    f.write("\n".join(lines) + "\n")
  print(f"wrote {args.out}")


if __name__ == "__main__":
  main()
