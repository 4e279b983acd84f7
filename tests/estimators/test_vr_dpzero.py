"""VR-DPZero, the estimator with state of its own: its recursion, its
sensitivity against an adversarial loss, and the library road (init,
make_step, an optax chain, the value's sampler)."""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from keys import explicit_keys, with_keys

import zoprivacy
from zoprivacy.estimators import base
from zoprivacy.estimators.vr_dpzero import ReferenceState

X_NOW = {"a": jnp.asarray([0.25, -0.5, 1.0]), "b": jnp.asarray([-1.0, 0.5])}
# A reference close by, as near convergence: the control variate cancels
# most of the finite difference, so the mean is pinned to a few 0.01.
X_PREV = jax.tree.map(lambda x: x + 0.05, X_NOW)
V_PREV = {"a": jnp.asarray([1.0, 0.0, -2.0]), "b": jnp.asarray([0.5, 3.0])}
A_DIAG = jnp.asarray([1.0, 2.0, 0.5, 3.0, 1.5])
BATCH = jnp.arange(8 * 5, dtype=jnp.float32).reshape(8, 5) / 10.0 - 2.0


def _flat(tree):
  return jax.flatten_util.ravel_pytree(tree)[0]


def quadratic_loss(params, example):
  """``1/2 (x - xi)^T A (x - xi)``: two-point differences are exact."""
  diff = _flat(params) - example
  return 0.5 * jnp.sum(A_DIAG * diff**2)


def _privacy(noise=None, **kw):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the test noise is not private
    return zoprivacy.Privacy(
      **{
        "clip": 1e3,
        "noise": zoprivacy.TestNoise(0, of=noise or zoprivacy.Float()),
        "noise_multiplier": 1e-4,
        "sampling": zoprivacy.Poisson(dataset_size=8, expected_batch_size=8),
        "assume_sampling": True,  # the tests hand in their own batches
        **kw,
      }
    )


def _state_at(est, point, reference):
  """A checked state at step 1 whose reference is ``reference``."""
  return zoprivacy.init(est, point)._replace(
    step=jnp.ones([], jnp.int32), method=reference
  )


def test_the_recursion_is_storms_in_expectation():
  """``E_u[v_t] = grad F(x_t) - beta grad F(x_{t-1}) + beta v_{t-1}``
  (exact differences on a quadratic, ``E[u u^T] = I`` on the sphere):
  4000 independent steps from one reference, each mean within 5 standard
  errors (a false failure below 1e-5 over the 5 coordinates)."""
  beta = 0.75
  est = zoprivacy.vr_dpzero(_privacy(), reference_weight=beta, smoothing=1e-2)
  ref = ReferenceState(X_PREV, V_PREV, jnp.asarray(beta, jnp.float32))
  state = _state_at(est, X_NOW, ref)

  def one(key):
    g, _ = est.update(
      None, with_keys(state, key), X_NOW, per_example_loss=quadratic_loss,
      batch=BATCH,
    )  # fmt: skip
    return _flat(g)

  keys = jax.random.split(jax.random.key(7), 4000)
  g = np.asarray(jax.jit(jax.vmap(one))(keys))
  grad = lambda x: np.mean(
    jax.vmap(lambda e: _flat(jax.grad(quadratic_loss)(x, e)))(BATCH), 0
  )
  want = grad(X_NOW) - beta * grad(X_PREV) + beta * np.asarray(_flat(V_PREV))
  se = g.std(0) / math.sqrt(len(g))
  np.testing.assert_array_less(np.abs(g.mean(0) - want), 5 * se + 1e-5)


def test_one_example_moves_the_release_by_at_most_the_clip():
  """The adversary's loss gives the canary finite differences of opposite
  signs at the two points: ``g(x_t) - beta g(x_{t-1})`` is ``(1 + beta)``
  times either, far past the clip. The clip bounds the difference itself:
  with and without the canary, under the same (exact) noise, the released
  sum moves by exactly ``C`` (clipping each term alone would let it move
  by ``(1 + beta) C``)."""
  beta, clip = 0.9, 1.0
  privacy = _privacy(zoprivacy.Exact(), clip=clip, noise_multiplier=1.0)
  est = zoprivacy.vr_dpzero(privacy, reference_weight=beta)
  here = {"w": jnp.asarray([0.5, 0.5])}  # sum(x_t) = 1
  there = {"w": jnp.asarray([-0.5, -0.5])}  # sum(x_{t-1}) = -1
  ref = ReferenceState(
    there, jax.tree.map(jnp.zeros_like, here), jnp.asarray(beta)
  )
  state = explicit_keys(_state_at(est, here, ref))
  canary = jnp.zeros([8]).at[0].set(1.0)  # only example 0 has a loss
  loss = lambda p, xi: xi * 1e6 * jnp.sum(p["w"]) ** 2 / 2

  def released(with_canary):
    mask = jnp.ones([8], bool).at[0].set(with_canary)
    _, new = est.update(
      None, state, here, per_example_loss=loss, batch=canary, mask=mask
    )
    return float(new.released[0]) * 8  # times B: the noisy sum

  moved = abs(released(True) - released(False))
  assert moved == pytest.approx(clip, rel=1e-6)


def test_its_first_step_is_dpzeros():
  """No reference yet (``beta = 0``): the first release and update are
  DPZero's at the same value and direction key."""
  privacy = _privacy(zoprivacy.Exact(), clip=1.0, noise_multiplier=1.0)
  out = []
  for factory in (zoprivacy.dpzero, zoprivacy.vr_dpzero):
    est = factory(privacy, direction_key=3)
    g, state = est.update(
      None, zoprivacy.init(est, X_NOW), X_NOW,
      per_example_loss=quadratic_loss, batch=BATCH,
    )  # fmt: skip
    out.append((_flat(g), state.released))
  np.testing.assert_array_equal(out[0][1], out[1][1])
  np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-6)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_trains_in_a_chain_with_init_make_step_and_the_values_sampler(dtype):
  """The library road: the value's sampler, ``zoprivacy.init``,
  ``zoprivacy.make_step`` (state donated) in a chain with ``optax.sgd``;
  the method slot carries the reference (the parameters the last step was
  taken at) in the parameters' dtype, and the epsilon spent is the plan's
  for the steps taken."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(512, 4)).astype(np.float32)
  y = x @ np.asarray([1.0, -2.0, 0.5, 3.0], np.float32)
  privacy = zoprivacy.Privacy(
    clip=20.0,
    noise_multiplier=0.7,
    sampling=zoprivacy.Poisson(dataset_size=512, expected_batch_size=128),
  )
  est = zoprivacy.vr_dpzero(privacy, smoothing=0.05, reference_weight=0.5)
  tx = optax.chain(est, optax.sgd(5e-3))
  w = jnp.zeros(4, dtype)
  state = zoprivacy.init(tx, w)
  assert isinstance(state[0].method, ReferenceState)
  step = zoprivacy.make_step(
    tx, lambda w, b: (b[0] @ w.astype(jnp.float32) - b[1]) ** 2
  )
  sampler = privacy.sampler()
  mse = lambda w: float(np.mean((x @ np.asarray(w, np.float32) - y) ** 2))
  start = mse(w)
  for t in range(60):
    before = np.asarray(w)
    w, state = step(
      w, state, zoprivacy.padded_batch((x, y), sampler.batch_indices(t))
    )
  reference = state[0].method
  np.testing.assert_array_equal(reference.point, before)
  assert {x.dtype for x in (w, reference.point, reference.estimate)} == {
    jnp.dtype(dtype)
  }
  assert float(reference.weight) == 0.5 and int(state[0].step) == 60
  assert mse(w) < 0.5 * start
  spent = zoprivacy.epsilon(state, 1e-5)
  assert spent == est.privacy_plan.epsilon(60, 1e-5) and 0 < spent < np.inf


def test_a_step_must_return_its_method_state_unchanged_in_type():
  def compute(params, args, dir_key, noise_key, method):
    return params, jnp.zeros([1]), method.astype(jnp.float16)

  est = base.build_estimator(
    compute,
    direction_key=0,
    privacy=None,
    method_init=lambda params: jnp.zeros([2], jnp.float32),
  )
  state = zoprivacy.init(est, X_NOW)
  with pytest.raises(TypeError, match="method state changed"):
    est.update(None, state, X_NOW, per_example_loss=quadratic_loss, batch=BATCH)


def test_refuses_what_it_cannot_account_or_run():
  with pytest.raises(ValueError, match=r"reference_weight must be in \[0, 1\)"):
    zoprivacy.vr_dpzero(_privacy(), reference_weight=1.0)
  with pytest.raises(ValueError, match="num_queries must be 1"):
    zoprivacy.vr_dpzero(_privacy(num_queries=2))


def test_an_injected_zero_reference_weight_is_dpzero():
  """``optax.inject_hyperparams`` injects ``reference_weight`` (a schedule
  of ``beta`` is possible); at 0 every step is DPZero's, bit for bit."""
  privacy = _privacy(zoprivacy.Exact(), clip=1.0, noise_multiplier=1.0)
  runs = []
  for factory in (zoprivacy.dpzero, zoprivacy.vr_dpzero):
    inject = optax.inject_hyperparams(
      factory, static_args=zoprivacy.static_args(factory)
    )
    tx = optax.chain(inject(privacy, smoothing=1e-2), optax.sgd(0.1))
    state = zoprivacy.init(tx, X_NOW)
    if factory is zoprivacy.vr_dpzero:
      state[0].hyperparams["reference_weight"] = jnp.asarray(0.0)
    step = zoprivacy.make_step(tx, jax.vmap(quadratic_loss, (None, 0)))
    params = jax.tree.map(jnp.copy, X_NOW)  # make_step donates it
    for _ in range(3):
      params, state = step(params, state, BATCH)
    runs.append(_flat(params))
  np.testing.assert_array_equal(runs[0], runs[1])
