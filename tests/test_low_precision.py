"""16-bit float parameters (bfloat16, float16): the perturbed points are
float32 on every path, and updates are stochastically rounded from a public
key (:mod:`zoprivacy.core.low_precision`, :mod:`zoprivacy.zo.rounding`)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoprivacy
from zoprivacy.core import low_precision
from zoprivacy.training import layerwise
from zoprivacy.zo import queries, rounding

DTYPES = (jnp.bfloat16, jnp.float16)
# Across binades, float16's subnormals (below 6.1e-5) and below its
# smallest subnormal (6e-8), and values already representable.
VALUES = np.array(
  [1.0 + 1e-4, -3.3e-3, 0.1234, -7e-6, 5e-8, 0.75, 1e-3], np.float32
)


def _neighbours(x, dtype):
  """The two values of ``dtype`` around each ``x`` (float32, numpy)."""
  near = jnp.asarray(x).astype(dtype)
  toward = jnp.where(jnp.asarray(x) > near.astype(jnp.float32), 1.0, -1.0)
  other = jnp.nextafter(near, (toward * jnp.inf).astype(dtype))
  a = np.asarray(near.astype(jnp.float32))
  b = np.asarray(other.astype(jnp.float32))
  return np.minimum(a, b), np.maximum(a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: jnp.dtype(d).name)
def test_stochastic_rounding_is_unbiased_between_the_two_neighbours(dtype):
  n = 1 << 14
  x = np.repeat(VALUES[:, None], n, axis=1)
  words = jax.random.bits(jax.random.key(0), x.shape, jnp.uint32)
  got = np.asarray(
    low_precision.round_stochastic(jnp.asarray(x), dtype, words).astype(
      jnp.float32
    )
  )
  lo, hi = _neighbours(VALUES, dtype)
  assert np.all((got == lo[:, None]) | (got == hi[:, None]))
  # P(hi) = (x - lo) / (hi - lo). Five standard errors for each of the 7
  # values: a false failure about once in 2e5 runs.
  p = np.where(hi > lo, (VALUES - lo) / np.where(hi > lo, hi - lo, 1), 0)
  frequency = np.mean(got == hi[:, None], axis=1)
  stderr = np.sqrt(p * (1 - p) / n) + 2.0**-24
  np.testing.assert_array_less(np.abs(frequency - p), 5 * stderr + 1e-12)
  assert np.all(frequency[p == 0] == 0)  # representable: never moved


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: jnp.dtype(d).name)
def test_stochastic_rounding_keeps_zeros_infinities_and_nan(dtype):
  x = jnp.asarray([0.0, -0.0, jnp.inf, -jnp.inf, jnp.nan, 2.0, -0.5])
  for seed in range(4):
    words = jax.random.bits(jax.random.key(seed), x.shape, jnp.uint32)
    got = np.asarray(low_precision.round_stochastic(x, dtype, words), float)
    np.testing.assert_array_equal(got, np.asarray(x, float))
    assert np.signbit(got[1])
  big = low_precision.round_stochastic(
    jnp.asarray([1e6], jnp.float32), dtype, jnp.zeros(1, jnp.uint32)
  )
  assert np.isinf(float(big[0])) == (dtype == jnp.float16)


def _accumulate(params, update, mode, steps=500):
  def body(t, p):
    key = rounding.step_key(jax.random.fold_in(jax.random.key(5), t))
    return rounding.apply_updates(p, update, key, mode)

  return jax.jit(lambda p: jax.lax.fori_loop(0, steps, body, p))(params)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: jnp.dtype(d).name)
def test_updates_below_half_a_spacing_accumulate_only_stochastically(dtype):
  """500 updates of +1e-4 to weights at 1.0: below half the spacing there
  (bfloat16 3.9e-3, float16 4.9e-4), so rounded to nearest each is lost;
  stochastically rounded they add up to 1.05 in expectation (the mean of
  4,096 weights within 5 standard errors, about 1e-3 for bfloat16)."""
  params = {"w": jnp.ones((4096,), dtype), "b": jnp.zeros((3,), jnp.float32)}
  update = {"w": jnp.full((4096,), 1e-4), "b": jnp.full((3,), 1e-4)}
  nearest = _accumulate(params, update, "nearest")
  assert np.all(np.asarray(nearest["w"], np.float32) == 1.0)
  sr = _accumulate(params, update, "stochastic")
  assert sr["w"].dtype == dtype and sr["b"].dtype == jnp.float32
  mean = float(jnp.mean(sr["w"].astype(jnp.float32)))
  assert abs(mean - 1.05) < 2e-3, mean
  np.testing.assert_allclose(sr["b"], nearest["b"], rtol=0)  # float32


def test_apply_updates_is_optax_on_float32_trees_bit_for_bit():
  rng = np.random.default_rng(0)
  params = {"a": jnp.asarray(rng.normal(size=(5, 3)), jnp.float32)}
  updates = {"a": jnp.asarray(rng.normal(size=(5, 3)) * 1e-3, jnp.float32)}
  got = rounding.apply_updates(params, updates, jax.random.key(0))
  want = optax.apply_updates(params, updates)
  assert np.asarray(got["a"]).tobytes() == np.asarray(want["a"]).tobytes()


def _problem(dtype):
  rng = np.random.default_rng(1)
  params = {
    "w": jnp.asarray(rng.normal(size=(6, 3)), dtype),
    "b": jnp.asarray(rng.normal(size=(3,)), dtype),
  }
  x = jnp.asarray(rng.normal(size=(8, 6)), jnp.float32)

  def loss(p, batch):
    h = batch @ p["w"].astype(jnp.float32) + p["b"].astype(jnp.float32)
    return jnp.sum(jnp.tanh(h) ** 2, axis=-1)

  return params, x, loss


def test_16bit_points_are_float32_on_both_perturbation_paths():
  """``x + l u`` with l = 1e-3 on bfloat16 weights: the losses equal those
  of the same weights held in float32 (to float32 rounding), whether the
  tree is perturbed whole or leaf by leaf at first use; rounded to
  bfloat16 the two points would mostly coincide."""
  params16, batch, loss = _problem(jnp.bfloat16)
  params32 = jax.tree.map(lambda x: x.astype(jnp.float32), params16)
  key = jax.random.key(2)
  u = jax.tree.map(
    lambda x: jax.random.normal(key, x.shape, jnp.float32), params32
  )
  leaves_u = jax.tree.leaves(u)

  def first_use(params):
    def lanes(i, leaf, after, which, start=0):
      return tuple(queries.perturb(leaf, leaves_u[i], (1e-3, -1e-3)[k])
                   for k in which)  # fmt: skip

    return queries.losses_perturbed_at_first_use(loss, params, batch, lanes)

  whole = jax.jit(lambda p: queries.two_point_losses(loss, p, u, 1e-3, batch))
  for path in (whole, jax.jit(first_use)):
    got, want = path(params16), path(params32)
    for g, w in zip(got, want):
      np.testing.assert_allclose(g, w, rtol=1e-5)
    assert np.max(np.abs(np.asarray(got[0]) - np.asarray(got[1]))) > 1e-4


@pytest.mark.parametrize("prng", ["counter2", "threefry"])
def test_generic_step_on_16bit_weights_releases_the_float32_scalar(prng):
  """A MeZO step on bfloat16 weights releases the scalar of the same
  weights held in float32: ``u`` is drawn in float32 for a 16-bit leaf by
  every generator (leaf by leaf, or whole by threefry), the points are
  float32, and so is the update."""
  params16, batch, loss = _problem(jnp.bfloat16)
  params32 = jax.tree.map(lambda x: x.astype(jnp.float32), params16)
  tx = zoprivacy.mezo(smoothing=1e-3, direction_prng=prng, direction_key=4)

  def step(params):
    state = tx.init(params)
    zeros = jax.tree.map(jnp.zeros_like, params)
    return tx.update(zeros, state, params, batched_loss=loss, batch=batch)

  (g16, s16), (g32, s32) = step(params16), step(params32)
  np.testing.assert_allclose(s16.released, s32.released, rtol=1e-5)
  for a, b in zip(jax.tree.leaves(g16), jax.tree.leaves(g32)):
    assert a.dtype == jnp.float32
    np.testing.assert_allclose(a, b, rtol=1e-5)


def test_layerwise_descend_needs_the_rounding_key_for_16bit_leaves():
  params = {"w": jnp.ones((4,), jnp.bfloat16)}
  keys = jax.random.split(jax.random.key(0), 1)
  with pytest.raises(ValueError, match="rounding_key"):
    layerwise.descend(params, "gaussian", keys, jnp.ones(1), 0.1)


def test_a_weight_beyond_float16s_range_is_refused_by_name():
  weights = np.array([[1.0, -7e4]], np.float32)
  with pytest.raises(ValueError, match="layers/fc1/kernel.*7e\\+04.*float16"):
    low_precision.cast_weights(weights, jnp.float16, "layers/fc1/kernel")
  assert low_precision.cast_weights(weights, jnp.bfloat16, "w").dtype == (
    jnp.bfloat16
  )
