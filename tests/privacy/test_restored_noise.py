"""A restored library state never replays its noise, however it was saved.

A default estimator state holds a session key: a public handle, whose
secret stays in this process (:mod:`zoprivacy.privacy.noise_sessions`).
Saved with pickle, orbax or ``flax.serialization`` and restored, here or in
a new process, it draws fresh noise without any call from the user: two
steps from one restored copy, or a step from the original and one from the
copy, never share their noise. The releases are dpzero's exact ones, so the
noise of each is read exactly: the release times its scale minus the
noise-free integer sum (the same step with zero noise passed in).
"""

import os
import pickle
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
import pytest
from flax import serialization

import zoprivacy
from zoprivacy.privacy import noise_sessions, randomness
from zoprivacy.privacy.noise_keys import explicit_key

D = 3
A = jnp.linspace(-1.0, 1.0, 8 * D).reshape(8, D)
B = -jnp.ones((8, D))  # another batch


def _loss(w, x):
  return jnp.sum((x - w) ** 2, axis=-1)


EST = zoprivacy.dpzero(
  clip=1.0,
  noise_multiplier=2.0,
  smoothing=1e-3,
  expected_batch_size=8,
  dataset_size=100,
  num_queries=4,  # four draws: all equal by chance w.p. below 1e-14
)
TX = optax.chain(EST, optax.sgd(0.1))
STEP = jax.jit(
  lambda s, x, **kw: TX.update(
    jnp.zeros(D), s, jnp.zeros(D), batched_loss=_loss, batch=x, **kw
  )[1]
)


def _noise(before, after, batch) -> np.ndarray:
  """The integer noise the step ``before -> after`` added on ``batch``."""
  plan = zoprivacy.find_plan(before)
  scale = plan.expected_batch_size * plan.grid_points / plan.clip
  bound = zoprivacy.refresh_noise_keys(before, secret=bytes(32))
  zero = jnp.zeros(plan.num_queries, jnp.int32)
  clean = STEP(bound, batch, discrete_noise=zero)[0].released
  units = (np.asarray(after[0].released) - np.asarray(clean)) * scale
  np.testing.assert_allclose(units, np.round(units), atol=1e-2)  # exact
  return np.round(units).astype(np.int64)


def _pickle(state, tmp_path):
  return pickle.loads(pickle.dumps(state))


def _flax(state, tmp_path):
  saved = serialization.to_state_dict(jax.device_get(state))
  return serialization.from_state_dict(TX.init(jnp.zeros(D)), saved)


def _orbax(state, tmp_path):
  path = tmp_path / f"ckpt{len(os.listdir(tmp_path))}"
  with ocp.StandardCheckpointer() as checkpointer:
    checkpointer.save(path, state)
    checkpointer.wait_until_finished()
    return checkpointer.restore(path, TX.init(jnp.zeros(D)))


SERIALIZERS = {"pickle": _pickle, "flax": _flax, "orbax": _orbax}


def _stepped_once():
  return STEP(TX.init(jnp.zeros(D)), A)


@pytest.mark.parametrize("name", sorted(SERIALIZERS))
def test_a_restored_state_never_replays_noise(name, tmp_path):
  """The original and a restored copy, stepped on the same batch, release
  different noise; two steps from the one copy on different batches never
  share noise (their difference is never the noise-free one); epsilon
  counts the steps before the save and after the restore."""
  saved = _stepped_once()
  restored = SERIALIZERS[name](saved, tmp_path)
  assert isinstance(restored[0].noise_key, noise_sessions.SessionKey)
  original = STEP(saved, A)
  with pytest.warns(noise_sessions.RecomputedStepWarning, match="Step 1"):
    on_a = STEP(restored, A)
  assert not np.array_equal(original[0].released, on_a[0].released)
  with pytest.warns(noise_sessions.RecomputedStepWarning):
    on_b = STEP(restored, B)
  noises = [_noise(saved, s, x) for s, x in [(original, A), (on_a, A)]]
  noises.append(_noise(restored, on_b, B))
  for i, j in [(0, 1), (0, 2), (1, 2)]:
    assert np.all(noises[i] != noises[j]), (i, j)
  assert int(on_b[0].step) == 2
  assert zoprivacy.epsilon(on_b, 1e-5) == EST.privacy_plan.epsilon(2, 1e-5)


@pytest.mark.parametrize("name", sorted(SERIALIZERS))
def test_nothing_saved_holds_the_secret_key(name, tmp_path):
  """The key that draws the next step's noise appears nowhere in what the
  serializer wrote, nor in the restored state."""
  saved = _stepped_once()
  words = np.asarray(jax.random.key_data(explicit_key(saved[0])), np.uint32)
  needle = words.tobytes()
  restored = SERIALIZERS[name](saved, tmp_path)
  blobs = [pickle.dumps(jax.device_get(restored))]
  if name == "pickle":
    blobs.append(pickle.dumps(saved))
  for root, _, files in os.walk(tmp_path):
    blobs += [open(os.path.join(root, f), "rb").read() for f in files]
  assert all(needle not in blob for blob in blobs)


def test_a_restore_in_a_new_process_draws_fresh_noise_without_warning():
  """A new process does not know the saved handle (simulated by emptying
  the keyring): the restored state's first step opens a fresh session."""
  saved = _stepped_once()
  blob = pickle.dumps(saved)
  original = STEP(saved, A)
  noise_sessions.forget_all()
  with warnings.catch_warnings():
    warnings.simplefilter("error", noise_sessions.RecomputedStepWarning)
    restored = STEP(pickle.loads(blob), A)
  assert np.all(_noise(saved, original, A) != _noise(saved, restored, A))


@pytest.mark.parametrize(
  "factory,kw",
  [
    (zoprivacy.dpzero, {"noise": "float", "smoothing": 1e-3}),
    (zoprivacy.dp_sgd, {}),  # exact vector noise, drawn on the device
  ],
)
def test_float_and_vector_noise_are_fresh_after_a_restore(factory, kw):
  tx = factory(
    clip=1.0,
    noise_multiplier=2.0,
    expected_batch_size=8,
    dataset_size=100,
    **kw,
  )
  w = jnp.zeros(D)
  step = jax.jit(
    lambda s: tx.update(jnp.zeros(D), s, w, batched_loss=_loss, batch=A)
  )
  state = tx.init(w)
  copy = pickle.loads(pickle.dumps(state))
  g1, _ = step(state)
  with pytest.warns(noise_sessions.RecomputedStepWarning):
    g2, _ = step(copy)
  assert np.all(np.asarray(g1) != np.asarray(g2))
  assert step._cache_size() == 1  # a restored key is no new trace


def test_a_state_stepped_twice_without_any_save_draws_fresh_noise():
  """The same in memory: one state, stepped from twice (no serializer)."""
  state = _stepped_once()
  first = STEP(state, A)
  with pytest.warns(noise_sessions.RecomputedStepWarning):
    second = STEP(state, A)
  assert np.all(_noise(state, first, A) != _noise(state, second, A))


def test_test_seeded_and_bound_states_are_explicit_and_replay():
  """Keys from an insecure test seed or bound to a secret are explicit:
  the noise is a pure function of the state (reproducible tests; one noise
  on every process of a run), and refreshing them is their owner's duty."""
  est = zoprivacy.dpzero(
    clip=1.0,
    noise_multiplier=2.0,
    smoothing=1e-3,
    expected_batch_size=8,
    dataset_size=100,
    insecure_test_noise_seed=3,
  )
  w = jnp.zeros(D)
  with pytest.warns(randomness.InsecureTestNoiseWarning):
    state = est.init(w)
  assert not isinstance(state.noise_key, noise_sessions.SessionKey)
  step = jax.jit(
    lambda s: est.update(None, s, w, batched_loss=_loss, batch=A)[1]
  )
  copy = pickle.loads(pickle.dumps(state))
  assert np.array_equal(step(state).released, step(copy).released)
