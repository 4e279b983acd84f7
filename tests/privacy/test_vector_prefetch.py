"""Exact vector noise drawn ahead of the step: the same values as on
demand, bound to (key, step), and no sampler call inside a prefetched step.

The estimators run here with :class:`NoiseStep` keys (``base.step_keys``
patched to :func:`vector_noise_prefetch.noise_step`), the prefetching path.
"""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import zoprivacy
from zoprivacy.estimators import base
from zoprivacy.secret_noise import vector_discrete_mechanism as vdm
from zoprivacy.secret_noise import vector_discrete_noise as vdn
from zoprivacy.secret_noise import vector_noise_prefetch as vnp


@pytest.fixture(autouse=True)
def _host_sampler(monkeypatch):
  """These tests are about the host sampler (the reference), which the
  estimators use when asked: the default is the device sampler."""
  monkeypatch.setattr(vdm, "DEFAULT_SAMPLER", "host")


KEY = np.arange(1, 5, dtype=np.uint32)
PARAMS = {"w": jnp.ones((3, 2)), "b": jnp.zeros(2)}
BATCH = jnp.arange(24, dtype=jnp.float32).reshape(8, 3) / 10


def _loss(p, x):
  return jnp.sum((x @ p["w"] + p["b"]) ** 2)


def prefetching_step_keys(state):
  """``base.step_keys`` with the noise key as a :class:`NoiseStep`."""
  return (
    jax.random.fold_in(state.direction_key, state.step),
    vnp.noise_step(state),
  )


def test_prefetched_and_on_demand_draws_are_the_same():
  source = vnp.VectorNoiseSource(KEY, 50, 1000)
  first = source.draw(0)  # not prefetched: drawn on demand
  source.join(1)
  assert source.draws == 1 + vnp.AHEAD  # step 0, then steps 1 .. AHEAD
  second = source.draw(1)  # prefetched
  assert source.draws == 2 + vnp.AHEAD  # only step 1 + AHEAD more
  assert np.array_equal(first, vdn.draw_step(KEY, 50, 1000, 0))
  assert np.array_equal(second, vdn.draw_step(KEY, 50, 1000, 1))
  fresh = vnp.VectorNoiseSource(KEY, 50, 1000)
  assert np.array_equal(fresh.draw(1), second)  # a jump: on demand
  assert not np.array_equal(first, second)
  assert not np.array_equal(second, vdn.draw_step(KEY + 1, 50, 1000, 1))
  assert not np.array_equal(second, vdn.draw_step(KEY, 51, 1000, 1))
  assert len(source._ready) <= vnp.AHEAD + 1  # bounded memory


def test_prefetch_errors_reach_the_step(monkeypatch):
  source = vnp.VectorNoiseSource(KEY, 50, 10)

  def fail(*args):
    raise RuntimeError("sampler refused")

  monkeypatch.setattr(vdn, "draw_step", fail)
  source.prefetch(3)
  source.join(3)
  with pytest.raises(RuntimeError, match="refused"):
    source.draw(3)


def _dp_sgd_update(monkeypatch):
  monkeypatch.setattr(base, "step_keys", prefetching_step_keys)
  tx = zoprivacy.dp_sgd(clip=1.0, noise_multiplier=2.0, expected_batch_size=8)
  update = jax.jit(
    lambda s: tx.update(None, s, PARAMS, per_example_loss=_loss, batch=BATCH)
  )
  return tx, update


def test_a_prefetched_dp_sgd_step_makes_no_sampler_call(monkeypatch):
  """Step 1 of a jitted DP-SGD update, once prefetched, calls the sampler
  only from the prefetching threads (steps 2, 3), and releases the same
  update as the same state drawn on demand by a fresh cache."""
  tx, update = _dp_sgd_update(monkeypatch)
  vnp._sources.clear()
  state = zoprivacy.init(tx, PARAMS)
  _, state = jax.block_until_ready(update(state))  # step 0, on demand
  for source in vnp._sources.values():
    source.join(1)
  calls, sampler = [], vdn.discrete_gaussian

  def counted(*args):
    calls.append(threading.current_thread().name)
    return sampler(*args)

  monkeypatch.setattr(vdn, "discrete_gaussian", counted)
  g1, _ = jax.block_until_ready(update(state))
  for source in vnp._sources.values():
    source.join(1 + vnp.AHEAD)
  assert calls and all(name == vnp.THREAD_NAME for name in calls), calls
  vnp._sources.clear()
  calls.clear()
  g1_demand, _ = jax.block_until_ready(update(state))  # step 1 on demand
  assert calls[0] != vnp.THREAD_NAME  # drawn in the step itself
  for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g1_demand)):
    assert np.array_equal(np.asarray(a), np.asarray(b))


def test_noise_is_bound_to_the_step_and_vmap_agrees(monkeypatch):
  """Successive steps get distinct noise; vmapped keys (an audit) draw each
  row as its own single-key draw."""
  noise = vnp.NoiseStep(jax.random.key(3, impl="rbg"), jnp.int32(5))
  one = jax.jit(lambda n: vnp.draw_in_jit(n, 40, 64))
  a = np.asarray(one(noise))
  b = np.asarray(one(noise._replace(step=jnp.int32(6))))
  assert not np.array_equal(a, b)
  keys = jax.random.split(jax.random.key(3, impl="rbg"), 3)
  rows = jax.jit(
    jax.vmap(lambda k: vnp.draw_in_jit(vnp.NoiseStep(k, jnp.int32(5)), 40, 64))
  )(keys)
  for i in range(3):
    single = one(vnp.NoiseStep(keys[i], jnp.int32(5)))
    assert np.array_equal(np.asarray(rows[i]), np.asarray(single))
  assert np.array_equal(
    a, vdn.draw_step(np.asarray(jax.random.key_data(noise.key)), 40, 64, 5)
  )
  part = noise.part(1)
  assert not np.array_equal(np.asarray(one(part)), a)


def test_word_source_is_philox_of_the_key():
  key = bytes(range(16))
  reference = np.random.Philox(key=np.frombuffer(key, np.uint64))
  assert np.array_equal(
    vdn.WordSource(key).words(9), reference.random_raw(9).astype(np.uint64)
  )


def test_uniforms_and_bernoulli_with_one_bound_per_entry():
  """Uniforms below 3 and 7 (one bound per entry): chi-square p > 1e-4
  each; Bernoulli(exp(-3/10)) and Bernoulli(exp(-5/2)) mixed in one call:
  means within 5 s.e. (false failures about 1e-4 and 1e-6 at a fresh key)."""
  src = vdn.words_for_keys(KEY, 7)
  n = 60_000
  bounds = np.where(np.arange(n) % 2 == 0, 3, 7)
  u = vdn._below(src, bounds)
  for m in (3, 7):
    counts = np.bincount(u[bounds == m], minlength=m)
    assert counts.size == m and stats.chisquare(counts).pvalue > 1e-4
  num = np.where(np.arange(n) % 2 == 0, 3, 5)
  den = np.where(np.arange(n) % 2 == 0, 10, 2)
  b = vdn.bernoulli_exp(src, num, den)
  for k in (0, 1):
    p = np.exp(-num[k] / den[k])
    mean = b[k::2].mean()
    assert abs(mean - p) <= 5 * np.sqrt(p * (1 - p) / (n // 2))
