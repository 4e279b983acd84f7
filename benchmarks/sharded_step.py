r"""A dpzero step on 8 simulated devices (``data=8``) against one device.

    python benchmarks/sharded_step.py

Sets ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` itself. The
wide MLP at batch 64 (and 256): the same jitted step, placed as the runner
places it (:mod:`experiments.run.placement`), on a ``data=1`` mesh (one device)
and a ``data=8`` mesh. Simulated devices share this machine's cores, so the
row measures the cost of partitioning (and the one scalar all-reduce), not
a speed-up; on real devices each one does 1/8 of the forward passes.
Prints one markdown row per batch size (used by ``step_cost.py``).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from timing import min_median_round_robin  # noqa: E402

import zoprivacy  # noqa: E402
from zoprivacy.core import sharding  # noqa: E402
from zoprivacy.models import small  # noqa: E402


def row(batch_size: int, reps: int) -> str:
  model = small.MLP(num_classes=10, hidden=(2304, 1024))
  rng = np.random.default_rng(0)
  x = rng.normal(size=(batch_size, 28, 28, 1)).astype(np.float32)
  y = rng.integers(0, 10, size=batch_size).astype(np.int32)
  params = model.init(jax.random.key(0), x[:1])

  def loss(p, b):
    return optax.softmax_cross_entropy_with_integer_labels(
      model.apply(p, b[0]), b[1]
    )

  tx = optax.chain(
    zoprivacy.dpzero(
      clip=1.0,
      noise_multiplier=1.0,
      smoothing=1e-3,
      expected_batch_size=batch_size,
      directions="gaussian",
    ),
    optax.sgd(1e-3),
  )
  fns = {}
  for label, devices in (("data=1", jax.devices()[:1]), ("data=8", None)):
    mesh = sharding.make_mesh({"data": -1}, devices=devices)
    placed = sharding.place_like(params, sharding.param_shardings(mesh, params))
    split = sharding.data_sharding(mesh)
    batch = jax.device_put((x, y), split)
    mask = jax.device_put(np.ones(batch_size, bool), split)
    state = zoprivacy.init(tx, placed)

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

    fns[label] = lambda step=step, p=placed, s=state, b=batch, m=mask: step(
      p, s, b, m
    )
  t = min_median_round_robin(fns, reps)
  (a_min, a_med), (b_min, b_med) = t["data=1"], t["data=8"]
  return (
    f"| wide MLP, batch {batch_size} | {a_min * 1e3:.2f} / {a_med * 1e3:.2f}"
    f" | {b_min * 1e3:.2f} / {b_med * 1e3:.2f} | {b_med / a_med:.2f} |"
  )


def main():
  assert jax.device_count() == 8, jax.devices()
  reps = int(sys.argv[1]) if len(sys.argv) > 1 else 21
  print("| setting | data=1 min / median ms | data=8 min / median ms | ratio |")
  print("|---|---|---|---|")
  for b in (64, 256):
    print(row(b, reps), flush=True)


if __name__ == "__main__":
  main()
