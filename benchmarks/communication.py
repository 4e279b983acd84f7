r"""Cross-device bytes per step, read from the compiled HLO, on 8 devices.

    python benchmarks/communication.py [--out benchmarks/results/communication.md]

Runs on 8 simulated CPU devices (it sets
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` itself). For dpzero,
pazo_m and dp_sgd on MLPs of about 1e5, 1e6 and 1e7 parameters, it compiles
one optimizer step on the meshes ``data=8`` and ``fsdp=8`` (placement as in
the runner: :mod:`experiments.run.placement`) and sums the bytes of every
collective in the compiled program (:func:`zoprivacy.core.sharding.collectives`:
the bytes of each collective's result). Nothing is timed: the figures are
properties of the compiled step.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import zoprivacy  # noqa: E402
from zoprivacy.core import sharding  # noqa: E402
from zoprivacy.models import small  # noqa: E402

WIDTHS = {"1e5": (96, 64), "1e6": (1024, 256), "1e7": (3072, 2048)}
BATCH = 64


def estimator(name, n):
  common = dict(
    clip=1.0, noise_multiplier=1.0, expected_batch_size=BATCH, dataset_size=n
  )
  if name == "dpzero":
    return zoprivacy.dpzero(smoothing=1e-3, **common)
  if name == "pazo_m":
    return zoprivacy.pazo_m(smoothing=1e-3, alpha=0.5, **common)
  return zoprivacy.dp_sgd(**common)


def step_collectives(name, hidden, axes):
  model = small.MLP(num_classes=10, hidden=hidden)
  x = jnp.zeros((BATCH, 28, 28, 1), jnp.float32)
  y = jnp.zeros((BATCH,), jnp.int32)
  params = jax.eval_shape(lambda: model.init(jax.random.key(0), x[:1]))
  num_params = sum(int(np.prod(v.shape)) for v in jax.tree.leaves(params))

  def loss(p, b):
    return optax.softmax_cross_entropy_with_integer_labels(
      model.apply(p, b[0]), b[1]
    )

  tx = optax.chain(estimator(name, 60000), optax.sgd(1e-3))
  mesh = sharding.make_mesh(axes)
  param_sh = sharding.param_shardings(mesh, params)
  split = sharding.data_sharding(mesh)

  def step(p, s, batch, mask, public):
    u, s = tx.update(
      jax.tree.map(jnp.zeros_like, p),
      s,
      p,
      batched_loss=loss,
      batch=batch,
      mask=mask,
      public_batch=public,
    )
    return jax.lax.with_sharding_constraint(
      optax.apply_updates(p, u), param_sh
    ), s

  abstract = lambda t, sh: jax.tree.map(
    lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), t, sh
  )
  p_abs = abstract(params, param_sh)
  s_abs = jax.eval_shape(functools.partial(zoprivacy.init, tx), params)
  batch = (
    jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=split),
    jax.ShapeDtypeStruct(y.shape, y.dtype, sharding=split),
  )
  mask = jax.ShapeDtypeStruct((BATCH,), jnp.bool_, sharding=split)
  public = (x[:16], y[:16])
  hlo = jax.jit(step).lower(p_abs, s_abs, batch, mask, public).compile()
  found = sharding.collectives(hlo.as_text())
  by_kind = {}
  for kind, _, num_bytes in found:
    by_kind[kind] = by_kind.get(kind, 0) + num_bytes
  return num_params, by_kind


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--out",
    default=os.path.join(
      os.path.dirname(__file__), "results", "communication.md"
    ),
  )
  args = parser.parse_args()
  assert jax.device_count() == 8, jax.devices()
  lines = [
    "# Collective bytes per step on 8 devices (from the compiled HLO)",
    "",
    "Command: `python benchmarks/communication.py`  ",
    f"Machine: {platform.machine()}, 8 simulated CPU devices, jax "
    f"{jax.__version__}; batch {BATCH}, MLP on 28x28 inputs. Bytes are "
    "those of each collective's result, summed per kind.",
    "",
    "| estimator | params | mesh | all-reduce bytes | all-gather bytes | "
    "other bytes | total / parameter bytes |",
    "|---|---|---|---|---|---|---|",
  ]
  for name in ("dpzero", "pazo_m", "dp_sgd"):
    for label, hidden in WIDTHS.items():
      for mesh_label, axes in (
        ("data=8", {"data": 8}),
        ("fsdp=8", {"fsdp": 8}),
      ):
        n, by_kind = step_collectives(name, hidden, axes)
        reduce_b = by_kind.pop("all-reduce", 0)
        gather_b = by_kind.pop("all-gather", 0)
        other = sum(by_kind.values())
        total = reduce_b + gather_b + other
        lines.append(
          f"| {name} | {n:,} (~{label}) | {mesh_label} | {reduce_b:,} | "
          f"{gather_b:,} | {other:,} | {total / (4 * n):.3g} |"
        )
        print(lines[-1], flush=True)
  lines += [
    "",
    "On `data=8` a zeroth-order step (dpzero) all-reduces only its clipped "
    "scalar sum: constant bytes whatever the size. PAZO-M adds the public "
    "gradient, which each device computes in full from the replicated public "
    "batch (no collective). DP-SGD all-reduces the clipped gradient sum: "
    "bytes linear in the parameter count. On `fsdp=8` the all-gathers are "
    "the parameter gathers of the forward (and, for DP-SGD, backward) pass.",
    "",
  ]
  os.makedirs(os.path.dirname(args.out), exist_ok=True)
  with open(args.out, "w") as f:
    f.write("\n".join(lines))
  print(f"wrote {args.out}")


if __name__ == "__main__":
  sys.exit(main())
