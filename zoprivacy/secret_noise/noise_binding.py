"""One noise on every host: bind the estimators' noise keys to a run secret.

Each estimator draws its secret ``noise_key`` from OS entropy at ``init``.
In a run over several processes every process calls ``init`` itself, so each
would draw its own key and add its own noise to the same clipped sum: the
"replicated" parameters would diverge, and the sum would be released once
per process with independent noise. A runner that broadcasts one run secret
to every process calls :func:`bind_noise_secret` right after ``init``: every
estimator's key is then derived from ``(run secret, the estimator's plan
fingerprint, its position in the state)``, the same on every process, so
every process adds the same noise (float or exact).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoprivacy.privacy import randomness


def _is_estimator_state(x) -> bool:
  return (
    hasattr(x, "_replace")
    and hasattr(x, "noise_key")
    and hasattr(x, "privacy_plan")
  )


def estimator_states(state) -> list:
  """Every estimator state (``EstimatorState``) inside an optax state tree,
  however chained or wrapped, in ``jax.tree`` order."""
  return [
    x
    for x in jax.tree.leaves(state, is_leaf=_is_estimator_state)
    if _is_estimator_state(x)
  ]


def key_words(noise_key) -> jax.Array:
  """The bits of a noise key as flat ``uint32`` words (four for the default
  128-bit ``rbg`` key)."""
  return jnp.asarray(jax.random.key_data(noise_key), jnp.uint32).reshape([-1])


def bind_noise_secret(opt_state, secret: bytes):
  """``opt_state`` with every estimator's noise key derived from ``secret``.

  Estimator ``i`` (in ``jax.tree`` order) gets the 128-bit ``rbg`` key
  derived by keyed BLAKE2b from ``(secret, plan fingerprint, i)``; its
  exact noise streams (:meth:`ExactNoiseSource.for_state`) follow from it.
  Processes that share ``secret`` (broadcast from OS entropy, never a
  public value) hold identical keys and add identical noise. Other leaves
  are returned unchanged.

  Args:
    opt_state: an optax state (any tree holding ``EstimatorState`` nodes).
    secret: 32 secret bytes, the same on every process.
  """
  secret = randomness.check_secret(secret)
  position = iter(range(1 << 30))

  def rebind(x):
    if not _is_estimator_state(x):
      return x
    words = x.privacy_plan.fingerprint_words()
    key = randomness.key_from_secret(secret, *words, next(position))
    return x._replace(noise_key=key)

  return jax.tree.map(rebind, opt_state, is_leaf=_is_estimator_state)
