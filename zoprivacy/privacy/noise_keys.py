"""The estimators' secret noise keys in an optax state: bind or refresh them.

Every estimator state (``EstimatorState``, however chained or wrapped)
holds a secret ``noise_key``; the noise of step ``t`` is a pure function of
``(noise_key, plan, t)``. Two consequences, and the two functions here:

* **One noise on every host.** Every process of a run calls ``init``
  itself, and each would draw its own key. :func:`bind_noise_secret`
  derives every estimator's key from one secret shared by all processes
  (broadcast from OS entropy, never a public value), so every process adds
  the same noise.
* **No noise twice.** Restoring an old state and stepping again on other
  inputs (other parameters after a crash, another learning rate, another
  batch) would add the *same* noise to a *different* sum: subtracting the
  two releases reveals the noise-free difference. Call
  :func:`refresh_noise_keys` on a state that may already have been stepped
  from (a restored checkpoint whose later steps may have run): every later
  step draws fresh noise, and each computed step must be counted (a replay
  is a fresh release, charged again). The runner (``python -m
  experiments.run``) does the same by itself, from its ledger.
"""

from __future__ import annotations

import jax

from zoprivacy.privacy import randomness


def is_estimator_state(x) -> bool:
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
    for x in jax.tree.leaves(state, is_leaf=is_estimator_state)
    if is_estimator_state(x)
  ]


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
    if not is_estimator_state(x):
      return x
    words = x.privacy_plan.fingerprint_words()
    key = randomness.key_from_secret(secret, *words, next(position))
    return x._replace(noise_key=key)

  return jax.tree.map(rebind, opt_state, is_leaf=is_estimator_state)


def refresh_noise_keys(opt_state, *, secret: bytes | None = None):
  """``opt_state`` with a fresh secret noise key in every estimator state,
  everything else unchanged (step counters, direction keys, plans).

  Call it after restoring a state from which steps may already have been
  computed, before stepping again: the later steps then draw noise that no
  earlier release used. Charge every computed step, the recomputed ones
  included (a replay is an independent release).

  Args:
    opt_state: an optax state (any tree holding ``EstimatorState`` nodes).
    secret: 32 secret bytes the fresh keys derive from; default: drawn now
      from OS entropy. In a job of several processes, draw it on one
      process and broadcast it (every process must add the same noise).

  The new keys are plain (uncommitted) arrays: place them on your mesh as
  you placed the state.
  """
  if secret is None:
    secret = randomness.new_secret()
  return bind_noise_secret(opt_state, secret)
