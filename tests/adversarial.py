"""Adversarial per-example losses shared by the sensitivity tests.

The batch holds huge (1e6, -1e9), NaN (kind 1) and infinite (kind 2) losses,
all depending on the parameters, so a correct clip is the only thing that
keeps one example's contribution bounded.
"""

import jax
import jax.flatten_util
import jax.numpy as jnp


def adversarial_loss(params, example):
  """Per-example loss ``scale * <x, (1..6)>``, or NaN / +-inf by ``kind``."""
  scale, kind = example[0], example[1]
  flat = jax.flatten_util.ravel_pytree(params)[0]
  value = scale * jnp.sum(flat * jnp.arange(1.0, flat.shape[0] + 1.0))
  value = jnp.where(kind == 1, jnp.nan, value)
  value = jnp.where(kind == 2, jnp.inf * jnp.sign(value + 1e-9), value)
  return value


ADV_BATCH = jnp.array(
  [
    [1e6, 0],
    [-3e5, 0],
    [1.0, 1],
    [5e3, 2],
    [2.0, 0],
    [-1e9, 0],
    [0.0, 2],
    [7.0, 0],
  ],
  jnp.float32,
)
