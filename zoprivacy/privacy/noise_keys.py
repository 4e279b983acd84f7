"""The estimators' noise keys in an optax state: session keys or bound ones.

Every estimator state (``EstimatorState``, however chained or wrapped)
holds a ``noise_key``; the noise of step ``t`` is keyed by ``(key, plan,
t)``. Two kinds of key:

* **Session keys** (the default, :mod:`zoprivacy.privacy.noise_sessions`):
  the state holds a public handle; the secret key stays in this process,
  and a step computed again (a restored or copied state stepped on, a state
  stepped from twice) gets a fresh key. Nothing secret is saved with the
  state, and no restore replays noise, without any call from the user.
* **Bound keys**: :func:`bind_noise_secret` derives every estimator's key
  from one secret shared by all processes of a run (broadcast from OS
  entropy, never a public value), so that every process adds the same
  noise. Such a state is secret material (a checkpoint of it replays its
  noise), and its noise is a pure function of the state: a step computed
  again must be bound to a fresh secret first (the runner, ``python -m
  experiments.run``, does so from its ledger: the attempt rule), and
  counted again.

:func:`refresh_noise_keys` gives a state new keys: session keys by
default, or keys bound to a new secret.
"""

from __future__ import annotations

import jax
import numpy as np

from zoprivacy.privacy import noise_sessions, randomness


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
  are returned unchanged. The bound keys are explicit: the noise is a pure
  function of the returned state, which is secret material (write it
  owner-only), and a step computed again from it needs a new secret first.

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
  """``opt_state`` with new noise keys in every estimator state, everything
  else unchanged (step counters, direction keys, plans).

  A default (session-keyed) state needs no refresh: a restored one draws
  fresh noise by itself. Refresh a state whose keys are bound to a secret
  (:func:`bind_noise_secret`) after restoring it, before stepping again,
  so that no step reuses its noise over other inputs; charge every
  computed step, the recomputed ones included (a replay is an independent
  release).

  Args:
    opt_state: an optax state (any tree holding ``EstimatorState`` nodes).
    secret: 32 secret bytes the new keys are bound to. Default: new
      session keys (:mod:`zoprivacy.privacy.noise_sessions`), whose
      secrets never leave this process. In a job of several processes,
      draw a secret on one process and broadcast it (every process must
      add the same noise).

  The new keys are plain (uncommitted) arrays: place them on your mesh as
  you placed the state.
  """
  if secret is not None:
    return bind_noise_secret(opt_state, secret)

  def renew(x):
    if not is_estimator_state(x):
      return x
    old = x.noise_key  # a session key's plan stamp is kept: see epsilon()
    stamp = old.plan if isinstance(old, noise_sessions.SessionKey) else None
    key = noise_sessions.new_session_key(x.privacy_plan, stamp)
    return x._replace(noise_key=key)

  return jax.tree.map(renew, opt_state, is_leaf=is_estimator_state)


def explicit_key(est, local=lambda x: x) -> jax.Array:
  """The explicit key that the next computation of ``est``'s step draws
  its noise from (host side): a bound key as it is; for a session key, the
  key this process's keyring will serve it
  (:func:`~zoprivacy.privacy.noise_sessions.peek`; refused in a job of
  several processes, where process 0's keyring serves the jitted step).
  ``local`` maps a global array to this process's copy."""
  key = est.noise_key
  if not isinstance(key, noise_sessions.SessionKey):
    return key
  if jax.process_count() > 1:
    raise ValueError(
      "This state's noise key is a session key: a jitted step looks it up "
      "on process 0 only, so this process's keyring cannot name the noise "
      "that step adds. In a job of several processes, bind the keys to one "
      "broadcast secret first (zoprivacy.privacy.bind_noise_secret) to "
      "draw a step's noise outside it."
    )
  step = int(np.asarray(local(est.step)))
  words = noise_sessions.peek(np.asarray(local(key.handle)), step)
  return jax.random.wrap_key_data(jax.numpy.asarray(words), impl="rbg")
