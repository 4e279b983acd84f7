"""The update of 16-bit float parameters, stochastically rounded from a
public key.

A parameter stored in bfloat16 or float16 is updated in float32 (``x - a g``
with ``g`` from the released scalars) and stored back by
:func:`~zoprivacy.core.low_precision.round_stochastic`, so that updates
below half a spacing are kept in expectation instead of being rounded away
(:mod:`zoprivacy.core.low_precision`). float32 and wider leaves are updated
as ``optax.apply_updates`` updates them, bit for bit.

Randomness. Step ``t``'s rounding key is :func:`step_key` of the step's
direction key ``fold_in(direction_key, t)``; element ``i`` of leaf ``l``
(numbered in ``jax.tree.leaves`` order, as the directions) is rounded with
the ``'counter2'`` word at ``(l, i)`` under that key. The key is PUBLIC: it
acts on an update computed from already-privatized scalars
(post-processing), so it needs no secret and must not touch one (it is
never derived from the noise key). A trajectory log records the rounding
(``update_rounding``) and replays it from the direction key it already
holds (:mod:`zoprivacy.training.replay`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from zoprivacy.core import low_precision
from zoprivacy.zo import counter_hash2
from zoprivacy.zo.directions import key_after

ROUNDING_TAG = 0x53524E44  # "SRND": the rounding stream of a step key
# How a trajectory log's 16-bit leaves were stored after each update:
# "nearest" (logs written before stochastic rounding) or "stochastic".
MODES = ("nearest", "stochastic")


def step_key(direction_step_key: jax.Array) -> jax.Array:
  """The rounding key of the step whose direction key is
  ``direction_step_key`` (``fold_in(direction_key, t)``)."""
  return jax.random.fold_in(direction_step_key, ROUNDING_TAG)


def store(leaf, value, key: jax.Array, number: int, after=()):
  """``value`` (the updated leaf, float32 for a 16-bit ``leaf``) stored in
  ``leaf``'s dtype: stochastically rounded with the words of leaf
  ``number`` under ``key``, drawn after ``after`` (so that the draw fuses
  into the update instead of being hoisted above the forward passes); a
  plain cast for any other dtype."""
  if not low_precision.is_narrow(leaf):
    return jnp.asarray(value).astype(jnp.result_type(leaf))
  words = counter_hash2.leaf_bits(
    key_after(key, after), number, jnp.shape(leaf)
  )
  return low_precision.round_stochastic(value, jnp.result_type(leaf), words)


def apply_updates(params, updates, key: jax.Array, mode: str = "stochastic"):
  """``optax.apply_updates(params, updates)`` where a 16-bit float leaf is
  updated in float32 and stored by :func:`store` (``mode='stochastic'``)
  or rounded to nearest (``'nearest'``: what logs written before
  stochastic rounding did). A tree without 16-bit leaves gets
  ``optax.apply_updates`` itself."""
  if mode not in MODES:
    raise ValueError(f"update rounding {mode!r}; use one of {MODES}.")
  if not low_precision.has_narrow(params):
    return optax.apply_updates(params, updates)
  leaves, treedef = jax.tree.flatten(params)
  steps = treedef.flatten_up_to(updates)

  def one(number, p, u):
    if not low_precision.is_narrow(p):
      return jnp.asarray(p + u).astype(jnp.result_type(p))
    value = p.astype(jnp.float32) + jnp.asarray(u).astype(jnp.float32)
    if mode == "nearest":
      return value.astype(p.dtype)
    return store(p, value, key, number, after=(u,))

  return treedef.unflatten(
    [one(i, p, u) for i, (p, u) in enumerate(zip(leaves, steps))]
  )
