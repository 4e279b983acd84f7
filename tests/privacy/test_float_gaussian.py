"""The float mechanisms' Gaussian draw: ``jax.random.normal`` bit for bit.

:mod:`zoprivacy.mechanisms.float_gaussian` only changes where XLA writes
the random bits (so the transform is vectorized on the CPU); the noise a
key gives must not change, nor its law under ``secure_mode``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from zoprivacy.mechanisms import float_gaussian
from zoprivacy.mechanisms import noise as mechanisms
from zoprivacy.privacy import randomness

SECRET = randomness.insecure_test_secret(7)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("impl", ["rbg", "threefry"])
@pytest.mark.parametrize("shape", [(), (1,), (3, 5), (1001,), (64, 300)])
def test_normal_is_jax_random_normal_bit_for_bit(impl, shape):
  if impl == "rbg":
    key = randomness.jax_noise_key(SECRET)
  else:
    key = jax.random.key(3)
  got = jax.jit(lambda k: float_gaussian.normal(k, shape, jnp.float32))(key)
  want = jax.jit(lambda k: jax.random.normal(k, shape, jnp.float32))(key)
  assert got.shape == want.shape and got.dtype == want.dtype
  assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
  # Under vmap (the conditional becomes a select), jitted as a step is.
  keys = jax.random.split(key, 3)
  batched = jax.jit(jax.vmap(lambda k: float_gaussian.normal(k, shape)))(keys)
  # (rbg draws differently under vmap than key by key: compare like with
  # like.)
  want_batched = jax.jit(jax.vmap(lambda k: jax.random.normal(k, shape)))(keys)
  assert np.asarray(batched).tobytes() == np.asarray(want_batched).tobytes()
  # Outside jit, op by op, XLA compiles erf_inv alone where jax.random.normal
  # is one compiled function: older JAX versions then round up to 3 ulp
  # apart (measured with jax 0.6.2; equal bit for bit under jit).
  eager = np.asarray(float_gaussian.normal(key, shape, jnp.float32))
  np.testing.assert_array_max_ulp(eager, np.asarray(want), maxulp=4)


def test_normal_in_float64_is_jax_random_normal():
  enable_x64 = getattr(jax, "enable_x64", None)
  if enable_x64 is None:  # JAX before 0.7
    from jax.experimental import enable_x64  # pylint: disable=g-import-not-at-top
  with enable_x64(True):
    key = jax.random.key(11)
    got = jax.jit(lambda k: float_gaussian.normal(k, (257,), jnp.float64))(key)
    want = jax.random.normal(key, (257,), jnp.float64)
    assert got.dtype == jnp.float64
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_secure_mode_sums_the_same_four_draws():
  key = randomness.jax_noise_key(SECRET)
  shape = (2000,)
  got = jax.jit(lambda k: float_gaussian.secure_mode_normal(k, shape, draws=4))(
    key
  )
  draws = jax.random.normal(key, (4,) + shape)
  # The same four normals, summed in another order: equal to rounding.
  np.testing.assert_allclose(
    np.asarray(got), np.asarray(jnp.sum(draws, axis=0) / 2), atol=2e-6
  )


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("defence", ["none", "secure_mode"])
def test_mechanism_noise_is_standard_normal_times_its_scale(defence):
  # Kolmogorov-Smirnov on 200,000 coordinates of sigma C = 2 noise; the
  # key is fixed, so the test is deterministic (its p-value under the null
  # is uniform: a fresh key would fail 1e-6 of the time).
  mech = mechanisms.GaussianMechanism(1.0, 2.0, float_defence=defence)
  key = randomness.jax_noise_key(SECRET, "ks")
  z = np.asarray(jax.jit(mech.add_noise)(key, jnp.zeros([200_000]))) / 2.0
  assert stats.kstest(z, "norm").pvalue > 1e-6
  assert abs(float(np.mean(z))) < 0.02 and abs(float(np.std(z)) - 1) < 0.01
