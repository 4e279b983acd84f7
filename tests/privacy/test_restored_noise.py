"""A restored library state never replays its noise, however it was saved.

A default estimator state holds a session key: a public handle, whose
secret stays in this process (:mod:`zoprivacy.privacy.noise_sessions`).
Saved with pickle, orbax or ``flax.serialization`` and restored, here or in
a new process, it draws fresh noise without any call from the user.

The tests play the attacker of the issue's reproduction. dpzero's exact
releases are integers on a grid (``rw.SCALE`` units per released unit); the
attacker steps one restored copy on ``D`` and another (or the same copy
again) on ``D' = D - {record 0}``. Had the two shared their noise, their
difference would be the noise-free one (record 0's clipped scalars: the
whole clip, 1024 units per query) and record 0 would be revealed. A release
of the same batch twice must differ too. With independent noise (integer
sigma 4096), two releases agree on all four queries by chance with
probability below ``1e-16``: every assertion below fails falsely less often.
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
import restore_worker as rw
from flax import serialization

import zoprivacy
from zoprivacy.privacy import PlanError, noise_sessions, randomness
from zoprivacy.privacy.noise_keys import explicit_key

STEP, TX = rw.STEP, rw.TX  # dpzero, 4 queries, exact noise; (state, mask)
D = rw.DIM
RECOMPUTED = noise_sessions.RecomputedStepWarning


def _pickle(state, tmp_path):
  return pickle.loads(pickle.dumps(state))


def _flax(state, tmp_path, template=None):
  """Restored into ``template`` (default: ``TX.init``), whose plan it
  takes (the plan is no leaf); the same for orbax."""
  template = zoprivacy.init(TX, jnp.zeros(D)) if template is None else template
  saved = serialization.to_state_dict(jax.device_get(state))
  return serialization.from_state_dict(template, saved)


def _orbax(state, tmp_path, template=None):
  template = zoprivacy.init(TX, jnp.zeros(D)) if template is None else template
  path = tmp_path / f"ckpt{len(os.listdir(tmp_path))}"
  with ocp.StandardCheckpointer() as checkpointer:
    checkpointer.save(path, state)
    checkpointer.wait_until_finished()
    return checkpointer.restore(path, template)


SERIALIZERS = {"pickle": _pickle, "flax": _flax, "orbax": _orbax}


def _stepped_once():
  return STEP(zoprivacy.init(TX, jnp.zeros(D)), rw.MASKS[0])


def _residual(on_d, on_d_prime, difference) -> np.ndarray:
  """The attacker's residual in grid units: the release on ``D`` minus the
  release on ``D'``, minus the noise-free difference (all zero iff the two
  releases shared their noise)."""
  units = (on_d - on_d_prime) * rw.SCALE - difference
  np.testing.assert_allclose(units, np.round(units), atol=1e-2)  # exact
  return np.round(units)


@pytest.mark.parametrize("name", sorted(SERIALIZERS))
def test_a_state_restored_twice_never_reveals_a_record(name, tmp_path):
  """The issue's attack, for each serializer: the original and a restored
  copy release the same batch with other noise; a copy stepped on ``D``
  and a second copy (or the same copy again) on ``D'`` never differ by the
  noise-free difference; epsilon counts the steps before the save and after
  the restore."""
  saved = _stepped_once()
  first, second = (SERIALIZERS[name](saved, tmp_path) for _ in range(2))
  assert isinstance(first[0].noise_key, noise_sessions.SessionKey)
  difference = rw.noise_free_difference(saved)
  assert np.all(np.abs(difference) == rw.PLAN.grid_points)  # record 0: C
  on_d = rw.release(saved, 0)
  with pytest.warns(RECOMPUTED, match="Step 1"):
    stepped = STEP(first, rw.MASKS[0])
  again = np.asarray(stepped[0].released, np.float64)
  assert np.any(on_d != again)  # the same batch twice: the noise differs
  with pytest.warns(RECOMPUTED):
    from_second = rw.release(second, 1)
  with pytest.warns(RECOMPUTED):
    from_first = rw.release(first, 1)
  for a, b in [(on_d, from_second), (again, from_second), (again, from_first)]:
    assert np.any(_residual(a, b, difference) != 0)
  assert int(stepped[0].step) == 2
  assert zoprivacy.epsilon(stepped, 1e-5) == rw.PLAN.epsilon(2, 1e-5)


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
  """A new process does not know the saved handle (simulated here by
  emptying the keyring; the slow audit starts real processes): the restored
  state's first step opens a fresh session, silently, and releases the
  same batch with other noise and ``D'`` without the noise-free
  difference."""
  saved = _stepped_once()
  blob = pickle.dumps(saved)
  on_d = rw.release(saved, 0)
  difference = rw.noise_free_difference(saved)
  noise_sessions.forget_all()
  with warnings.catch_warnings():
    warnings.simplefilter("error", RECOMPUTED)
    again = rw.release(pickle.loads(blob), 0)
  noise_sessions.forget_all()
  with warnings.catch_warnings():
    warnings.simplefilter("error", RECOMPUTED)
    on_d_prime = rw.release(pickle.loads(blob), 1)
  assert np.any(on_d != again)
  assert np.any(_residual(on_d, on_d_prime, difference) != 0)
  assert np.any(_residual(again, on_d_prime, difference) != 0)


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
    lambda s: tx.update(
      jnp.zeros(D), s, w, batched_loss=rw.loss, batch=rw.BATCH
    )
  )
  state = zoprivacy.init(tx, w)
  copy = pickle.loads(pickle.dumps(state))
  g1, _ = step(state)
  with pytest.warns(RECOMPUTED):
    g2, _ = step(copy)
  assert np.any(np.asarray(g1) != np.asarray(g2))  # the same noise: equal
  assert step._cache_size() == 1  # a restored key is no new trace


def test_a_state_stepped_twice_without_any_save_draws_fresh_noise():
  """The same in memory: one state, stepped from twice (no serializer)."""
  state = _stepped_once()
  difference = rw.noise_free_difference(state)
  on_d = rw.release(state, 0)
  with pytest.warns(RECOMPUTED):
    again = rw.release(state, 0)
  with pytest.warns(RECOMPUTED):
    on_d_prime = rw.release(state, 1)
  assert np.any(on_d != again)
  assert np.any(_residual(on_d, on_d_prime, difference) != 0)


def test_test_seeded_and_bound_states_are_explicit_and_replay():
  """Keys from an insecure test seed or bound to a secret are explicit:
  the noise is a pure function of the state (reproducible tests; one noise
  on every process of a run), and refreshing them is their owner's duty."""
  est = rw.dpzero(insecure_test_noise_seed=3)
  w = jnp.zeros(D)
  with pytest.warns(randomness.InsecureTestNoiseWarning):
    state = zoprivacy.init(est, w)
  assert not isinstance(state.noise_key, noise_sessions.SessionKey)
  step = jax.jit(
    lambda s: est.update(None, s, w, batched_loss=rw.loss, batch=rw.BATCH)[1]
  )
  copy = pickle.loads(pickle.dumps(state))
  assert np.array_equal(step(state).released, step(copy).released)


def test_the_attack_reveals_a_record_through_bound_keys():
  """The attack's control: a state bound to a secret (explicit keys, as
  every key was before session keys) restored twice releases ``D`` and
  ``D'`` with the same noise, and the residual is zero on every query."""
  bound = zoprivacy.refresh_noise_keys(_stepped_once(), secret=bytes(range(32)))
  first, second = (pickle.loads(pickle.dumps(bound)) for _ in range(2))
  difference = rw.noise_free_difference(bound)
  residual = _residual(rw.release(first, 0), rw.release(second, 1), difference)
  assert np.all(residual == 0)


def test_rows_of_a_vmapped_step_from_one_state_never_share_noise():
  """``vmap`` over batches (or parameters) from one state maps the key
  lookup too: ``D`` and ``D'`` stepped side by side are released with
  independent noise (one lookup for both rows would reveal record 0)."""
  state = _stepped_once()
  difference = rw.noise_free_difference(state)
  rows = jax.jit(jax.vmap(lambda m: STEP(state, m)[0].released))
  with pytest.warns(RECOMPUTED):  # the second row: another release
    on_d, on_d_prime = np.asarray(rows(jnp.stack(rw.MASKS)), np.float64)
  assert np.any(_residual(on_d, on_d_prime, difference) != 0)


def test_a_per_device_program_refuses_session_keys():
  """Inside ``shard_map`` every device would look up its own key and add
  its own noise to one sum: refused in one paragraph, naming the way out."""
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("d",))
  P = jax.sharding.PartitionSpec
  per_device = jax.shard_map(
    lambda s: STEP(s, rw.MASKS[0])[0].released,
    mesh=mesh,
    in_specs=P(),
    out_specs=P(),
  )
  with pytest.raises(ValueError, match="inside shard_map.*bind_noise_secret"):
    jax.jit(per_device).lower(zoprivacy.init(TX, jnp.zeros(D)))


def _tx_with_noise(noise_multiplier):
  return optax.chain(
    rw.dpzero(noise_multiplier=noise_multiplier), optax.sgd(0.1)
  )


def test_epsilon_never_counts_saved_steps_under_a_templates_plan(tmp_path):
  """A state saved after a step at noise 2, restored into a template at
  noise 20: ``flax.serialization`` restores the saved plan (epsilon 0.295,
  as saved); orbax takes the template's, which would count the step at
  noise 20 (0.010). The saved stamp refuses that, before and after a later
  step and after refresh_noise_keys; the same plan, or a state saved
  before any step, counts as usual."""
  other = _tx_with_noise(20.0)
  template = zoprivacy.init(other, jnp.zeros(D))
  restored = _flax(_stepped_once(), tmp_path, template)
  assert zoprivacy.epsilon(restored, 1e-5) == rw.PLAN.epsilon(1, 1e-5)
  restored = _orbax(_stepped_once(), tmp_path, template)
  stepped = jax.jit(
    lambda s: other.update(
      jnp.zeros(D), s, jnp.zeros(D), batched_loss=rw.loss, batch=rw.BATCH
    )[1]
  )
  later = stepped(restored)
  for state in (restored, later, zoprivacy.refresh_noise_keys(restored)):
    with pytest.raises(PlanError, match="did not all run under its plan"):
      zoprivacy.epsilon(state, 1e-5)
  same = _orbax(_stepped_once(), tmp_path, zoprivacy.init(TX, jnp.zeros(D)))
  assert zoprivacy.epsilon(same, 1e-5) == rw.PLAN.epsilon(1, 1e-5)
  fresh = stepped(_orbax(zoprivacy.init(TX, jnp.zeros(D)), tmp_path, template))
  plan = zoprivacy.find_plan(template)
  assert zoprivacy.epsilon(fresh, 1e-5) == plan.epsilon(1, 1e-5)


def test_another_process_cannot_name_a_session_keys_noise(monkeypatch):
  """In a job of several processes a jitted step looks its key up on
  process 0: drawing a step's noise outside it from a session key
  (``ExactNoiseSource.for_state``) is refused, naming bind_noise_secret."""
  state = zoprivacy.init(TX, jnp.zeros(D))
  monkeypatch.setattr(jax, "process_count", lambda: 2)
  with pytest.raises(ValueError, match="bind_noise_secret"):
    zoprivacy.ExactNoiseSource.for_state(state)
