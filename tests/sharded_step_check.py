"""Run as a subprocess with 8 simulated CPU devices (see test_sharding.py).

Prints one JSON line: max abs difference between the 8-device and the
1-device dpzero update, and the shapes of all cross-device collectives, for
floating-point noise (top level), for exact discrete noise (``"exact"``) and
for exact noise in physical chunks of 16 rows (``"chunked"``).
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


def main():
  assert jax.device_count() == 8, jax.devices()
  model = small.MLP(num_classes=10, hidden=(64,))
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 8, 8, 1)).astype(np.float32)
  y = rng.integers(0, 10, size=64).astype(np.int32)
  mask = np.arange(64) < 53  # padded Poisson batch
  params = model.init(jax.random.key(0), x[:1])
  num_params = sum(v.size for v in jax.tree.leaves(params))

  def batched_loss(p, batch):
    logits = model.apply(p, batch[0])
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch[1])

  mesh = sharding.data_mesh(8)

  def check(exact_noise, physical_batch_size=None):
    """One step on 8 devices and on one, from the same state (same public
    direction key, same noise key: bound to a secret, so that both
    computations of the step draw the same noise) and, for exact noise, the
    same host-drawn integer noise (a replicated input); the batch's work in
    physical chunks of ``physical_batch_size`` rows, if given."""
    privacy = zoprivacy.Privacy(
      clip=1.0,
      noise=zoprivacy.Exact() if exact_noise else zoprivacy.Float(),
      noise_multiplier=1.0,
      sampling=zoprivacy.Poisson(dataset_size=1000, expected_batch_size=50),
      assume_sampling=True,  # the same arrays on 8 devices and on one
    )
    est = zoprivacy.dpzero(
      privacy,
      smoothing=1e-3,
      direction_key=42,
      physical_batch_size=physical_batch_size,
    )
    tx = optax.chain(est, optax.sgd(0.1))
    state = zoprivacy.refresh_noise_keys(
      zoprivacy.init(tx, params), secret=bytes(32)
    )
    plan = zoprivacy.find_plan(state)
    noise = zoprivacy.ExactNoiseSource(plan).draw(0) if exact_noise else None

    def step(p, s, batch, m, discrete_noise):
      extra = (
        {} if discrete_noise is None else {"discrete_noise": discrete_noise}
      )
      updates, s = tx.update(
        jax.tree.map(jnp.zeros_like, p),
        s,
        p,
        batched_loss=batched_loss,
        batch=batch,
        mask=m,
        **extra,
      )
      return optax.apply_updates(p, updates), s

    sharded = sharding.jit_data_parallel(
      step, mesh, num_args=5, batch_argnums=(2, 3)
    )
    single = jax.jit(step)
    # Compiled once: the executable both runs and is inspected.
    compiled = sharded.lower(params, state, (x, y), mask, noise).compile()
    p8, _ = compiled(params, state, (x, y), mask, noise)
    p1, _ = single(params, state, (x, y), mask, noise)
    diff = max(
      float(jnp.max(jnp.abs(a - b)))
      for a, b in zip(jax.tree.leaves(p8), jax.tree.leaves(p1))
    )
    moved = max(
      float(jnp.max(jnp.abs(a - b)))
      for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(params))
    )
    found = sharding.collectives(compiled.as_text())
    collectives = [(kind, shape) for kind, shape, _ in found]
    sizes = [num_bytes for _, _, num_bytes in found]
    return {
      "max_abs_diff": diff,
      "max_abs_update": moved,
      "collectives": collectives,
      "collective_sizes": sizes,
      "mechanism": plan.mechanism.name,
      "sharding": str(p8["params"]["Dense_0"]["kernel"].sharding),
    }

  out = check(exact_noise=False)
  out.update(
    num_params=num_params,
    exact=check(exact_noise=True),
    chunked=check(exact_noise=True, physical_batch_size=16),
  )
  print(json.dumps(out))


if __name__ == "__main__":
  sys.exit(main())
