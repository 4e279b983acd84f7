"""A library user's saved states, restored in a new process and stepped.

Imported by ``test_composition_audit_restore.py`` for the setting (the
estimator, the neighbouring batches, saving and loading) and run by it as a
subprocess: ``python restore_worker.py '{"format": "orbax", "path": ...,
"num_states": 150, "take": 50, "neighbour": 0}'`` loads the saved list
of states (pickle or orbax), steps the first ``take`` once on dataset
``D`` (``neighbour`` 0) or ``D'`` (1: ``D`` without record 0), and prints
one JSON line: the released values and how many
``RecomputedStepWarning`` were raised. With ``"mesh": true`` (and 8
simulated devices) each state is replicated on the mesh and the batch
split by rows.
"""

import json
import os
import pickle
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from jax.sharding import PartitionSpec as P

import zoprivacy
from zoprivacy.privacy import noise_sessions

DIM = 3


def dpzero(**overrides):
  """The audit's estimator: dpzero, 4 queries, exact noise, a batch of 8 of
  100 (``overrides``: any other factory argument)."""
  kw = dict(clip=1.0, noise_multiplier=2.0, smoothing=1e-3, num_queries=4)
  kw.update(expected_batch_size=8, dataset_size=100)
  return zoprivacy.dpzero(**{**kw, **overrides})


EST = dpzero()
TX = optax.chain(EST, optax.sgd(0.1))
PLAN = EST.privacy_plan
SCALE = PLAN.expected_batch_size * PLAN.grid_points / PLAN.clip  # units
BATCH = jnp.concatenate(
  [jnp.full((1, DIM), 50.0), jnp.linspace(-1, 1, 7 * DIM).reshape(7, DIM)]
)  # record 0 moves every scalar by the whole clip
MASKS = (jnp.ones(8, bool), jnp.arange(8) > 0)  # D, and D' = D - {record 0}


def loss(w, x):
  return jnp.sum((x - w) ** 2, axis=-1)


STEP = jax.jit(
  lambda s, mask, batch=BATCH, **kw: TX.update(
    jnp.zeros(DIM),
    s,
    jnp.zeros(DIM),
    batched_loss=loss,
    batch=batch,
    mask=mask,
    **kw,
  )[1]
)


def release(state, neighbour: int) -> np.ndarray:
  """The released values of ``state``'s next step on ``D`` or ``D'``."""
  return np.asarray(STEP(state, MASKS[neighbour])[0].released, np.float64)


def _mesh_release(state, neighbour: int) -> np.ndarray:
  """:func:`release` on a mesh of every device: the state replicated, the
  batch split by rows; every device must hold the same release."""
  mesh = jax.sharding.Mesh(np.array(jax.devices()), ("data",))
  rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
  state = jax.device_put(state, jax.sharding.NamedSharding(mesh, P()))
  mask = jax.device_put(MASKS[neighbour], rows)
  out = STEP(state, mask, batch=jax.device_put(BATCH, rows))[0].released
  shards = [np.asarray(x.data) for x in out.addressable_shards]
  assert len(shards) == 8 and all(np.array_equal(shards[0], x) for x in shards)
  return shards[0].astype(np.float64)


def noise_free_difference(state) -> np.ndarray:
  """``D``'s noise-free integer sums minus ``D'``'s, at ``state``'s step
  (zero noise passed to a copy bound to a throwaway secret)."""
  bound = zoprivacy.refresh_noise_keys(state, secret=bytes(32))
  zero = jnp.zeros(PLAN.num_queries, jnp.int32)
  a, b = (
    np.asarray(STEP(bound, m, discrete_noise=zero)[0].released) for m in MASKS
  )
  return np.round((a - b) * SCALE)


def template(n: int):
  return [zoprivacy.init(TX, jnp.zeros(DIM)) for _ in range(n)]


def _stacked(states):
  """The states as one pytree of stacked leaves (one array per field: a
  checkpoint of a few arrays, not thousands)."""
  return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def save(states, fmt: str, path: str) -> None:
  if fmt == "pickle":
    with open(path, "wb") as f:
      pickle.dump(_stacked(states), f)
    return
  with ocp.StandardCheckpointer() as checkpointer:
    checkpointer.save(path, _stacked(states))
    checkpointer.wait_until_finished()


def load(fmt: str, path: str, n: int):
  if fmt == "pickle":
    with open(path, "rb") as f:
      stacked = pickle.load(f)
  else:
    with ocp.StandardCheckpointer() as checkpointer:
      stacked = checkpointer.restore(path, _stacked(template(n)))
  return [jax.tree.map(lambda x, i=i: x[i], stacked) for i in range(n)]


def main(spec: dict) -> dict:
  states = load(spec["format"], spec["path"], spec["num_states"])
  states = states[: spec.get("take")]
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", noise_sessions.RecomputedStepWarning)
    step = _mesh_release if spec.get("mesh") else release
    released = [step(s, spec["neighbour"]).tolist() for s in states]
  warned = sum(
    issubclass(w.category, noise_sessions.RecomputedStepWarning) for w in caught
  )
  return {"released": released, "warnings": warned, "pid": os.getpid()}


if __name__ == "__main__":
  print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
