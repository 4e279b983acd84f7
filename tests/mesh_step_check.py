"""Run as a subprocess with 8 simulated CPU devices (see test_mesh.py).

For dpzero, dp_zo, pazo_m and dp_sgd, one jitted step on the meshes
``data=8``, ``fsdp=8`` and ``data=2 x fsdp=4`` (parameters placed by
:func:`zoprivacy.core.sharding.param_shardings`, batch and mask by
:func:`zoprivacy.core.sharding.data_sharding`) against the same step on one
device, from the same state (same public direction key, same test noise
seed). Prints one JSON line: per estimator and mesh, the max abs difference
of the updated parameters, the collectives, and the per-device compiled
memory of the parameters (argument bytes) against replication; and the
compiled per-device peak of a dpzero step on a wider MLP, replicated against
``fsdp=8`` (:func:`fsdp_memory`).
"""

import json
import os
import sys

os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
)
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # pylint: disable=g-import-not-at-top
import jax.numpy as jnp
import numpy as np
import optax

import zoprivacy
from zoprivacy.core import sharding
from zoprivacy.models import small

MESHES = {
  "data=8": {"data": 8},
  "fsdp=8": {"fsdp": 8},
  "data=2,fsdp=4": {"data": 2, "fsdp": 4},
}


def estimators(n):
  common = dict(
    clip=1.0,
    noise_multiplier=1.0,
    expected_batch_size=50.0,
    dataset_size=n,
    direction_key=42,
    insecure_test_noise_seed=7,
  )
  return {
    "dpzero": zoprivacy.dpzero(smoothing=1e-3, **common),
    "dp_zo": zoprivacy.dp_zo(smoothing=1e-3, **common),
    "pazo_m": zoprivacy.pazo_m(smoothing=1e-3, alpha=0.5, **common),
    "dp_sgd": zoprivacy.dp_sgd(**common),
  }


def main():
  assert jax.device_count() == 8, jax.devices()
  model = small.MLP(num_classes=16, hidden=(128, 64))
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 8, 8, 1)).astype(np.float32)
  y = rng.integers(0, 16, size=64).astype(np.int32)
  mask = np.arange(64) < 53  # a padded Poisson batch
  public = (x[:16] + 0.1, y[:16])
  params = model.init(jax.random.key(0), x[:1])

  def loss(p, batch):
    logits = model.apply(p, batch[0])
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch[1])

  out = {"num_params": int(sum(v.size for v in jax.tree.leaves(params)))}
  for name, est in estimators(1000).items():
    tx = optax.chain(est, optax.sgd(0.1))
    state = zoprivacy.init(tx, params)

    def step(p, s, batch, m, pub, tx=tx):
      updates, s = tx.update(
        jax.tree.map(jnp.zeros_like, p),
        s,
        p,
        batched_loss=loss,
        batch=batch,
        mask=m,
        public_batch=pub,
      )
      return optax.apply_updates(p, updates), s

    single = jax.jit(step)
    p1, _ = single(params, state, (x, y), mask, public)
    moved = max(
      float(jnp.max(jnp.abs(a - b)))
      for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(params))
    )
    out[name] = {"max_abs_update": moved}
    for label, axes in MESHES.items():
      mesh = sharding.make_mesh(axes)
      param_sh = sharding.param_shardings(mesh, params)
      split = sharding.data_sharding(mesh)
      placed = sharding.place_like(params, param_sh)
      s0 = zoprivacy.init(tx, placed)
      batch = jax.device_put((x, y), split)
      m = jax.device_put(mask, split)

      def constrained(p, s, b, mm, pub, step=step, param_sh=param_sh):
        new_p, s = step(p, s, b, mm, pub)
        return jax.lax.with_sharding_constraint(new_p, param_sh), s

      # Compiled once: the executable both runs and is measured.
      compiled = jax.jit(constrained).lower(placed, s0, batch, m, public)
      compiled = compiled.compile()
      p8, _ = compiled(placed, s0, batch, m, public)
      mem = compiled.memory_analysis()
      out[name][label] = {
        "max_abs_diff": max(
          float(jnp.max(jnp.abs(a - b)))
          for a, b in zip(jax.tree.leaves(p8), jax.tree.leaves(p1))
        ),
        "collectives": sharding.collectives(compiled.as_text()),
        "argument_bytes": int(mem.argument_size_in_bytes),
        "peak_bytes_per_device": int(
          mem.argument_size_in_bytes
          + mem.output_size_in_bytes
          + mem.temp_size_in_bytes
          - mem.alias_size_in_bytes
        ),
        "param_bytes_per_device": sum(
          x.addressable_shards[0].data.nbytes for x in jax.tree.leaves(p8)
        ),
        "kernel_sharding": str(p8["params"]["Dense_0"]["kernel"].sharding.spec),
      }
  out["fsdp_memory"] = fsdp_memory()
  print(json.dumps(out))


def _peak_bytes(compiled) -> int:
  mem = compiled.memory_analysis()
  return int(
    mem.argument_size_in_bytes
    + mem.output_size_in_bytes
    + mem.temp_size_in_bytes
    - mem.alias_size_in_bytes
  )


def fsdp_memory():
  """A dpzero step on a 1.1M-parameter MLP (4.5 MB of float32) at batch 16:
  compiled peak bytes per device, replicated (``data=8``) against
  ``fsdp=8``, and three trained steps under ``fsdp=8``."""
  model = small.MLP(num_classes=16, hidden=(1024, 1024))
  rng = np.random.default_rng(1)
  x = rng.normal(size=(16, 8, 8, 1)).astype(np.float32)
  y = rng.integers(0, 16, size=16).astype(np.int32)
  mask = np.ones(16, bool)
  params = model.init(jax.random.key(0), x[:1])
  tx = optax.chain(estimators(1000)["dpzero"], optax.sgd(0.1))

  def loss(p, batch):
    logits = model.apply(p, batch[0])
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch[1])

  def step(p, s, batch, m):
    zeros = jax.tree.map(jnp.zeros_like, p)
    updates, s = tx.update(zeros, s, p, batched_loss=loss, batch=batch, mask=m)
    return optax.apply_updates(p, updates), s

  out = {"param_bytes": int(sum(v.nbytes for v in jax.tree.leaves(params)))}
  for label in ("data=8", "fsdp=8"):
    mesh = sharding.make_mesh(MESHES[label])
    param_sh = sharding.param_shardings(mesh, params)
    split = sharding.data_sharding(mesh)
    p = sharding.place_like(params, param_sh)
    s = zoprivacy.init(tx, p)
    b, m = jax.device_put((x, y), split), jax.device_put(mask, split)
    jitted = jax.jit(step, out_shardings=(param_sh, None), donate_argnums=0)
    jitted = jitted.lower(p, s, b, m).compile()
    out[label] = _peak_bytes(jitted)
    if label == "fsdp=8":
      before = np.asarray(p["params"]["Dense_1"]["kernel"])
      for _ in range(3):
        p, s = jitted(p, s, b, m)
      after = np.asarray(p["params"]["Dense_1"]["kernel"])
      out["trained_max_abs_change"] = float(np.max(np.abs(after - before)))
      out["trained_sharding"] = str(p["params"]["Dense_1"]["kernel"].sharding)
  return out


if __name__ == "__main__":
  sys.exit(main())
