"""Test helper: give an estimator state both keys from one test key.

Statistical tests draw many estimates, each with its own directions AND its
own noise. The noise key is secret in real use; tests derive it from the
test key so that each draw is independent and the test is reproducible.
"""

import jax
import jax.numpy as jnp

import zoprivacy


def noise_key_from(key):
  """A 128-bit rbg noise key derived from a (threefry) test key."""
  data = jax.random.key_data(jax.random.fold_in(key, 0x5EC))
  words = jnp.concatenate(
    [data, jax.random.key_data(jax.random.fold_in(key, 1))]
  )
  return jax.random.wrap_key_data(words.astype(jnp.uint32), impl="rbg")


def with_keys(state, key):
  """``state`` with direction key ``key`` and a noise key derived from it."""
  return state._replace(direction_key=key, noise_key=noise_key_from(key))


def explicit_keys(state):
  """``state`` with its noise keys bound to a fixed (public) secret:
  explicit keys, so that two computations of one step add the same noise,
  which a test of one step's sensitivity compares (a default state's
  session keys give each computation fresh noise)."""
  return zoprivacy.refresh_noise_keys(state, secret=bytes(range(32)))
