"""Noise keys that never leave the process: no restored state replays noise.

A default estimator state (``tx.init``) holds no secret. Its ``noise_key``
is a :class:`SessionKey`: a random *handle* (128 bits from OS entropy, not
a key, harmless to publish). The secret key behind it lives only in this
process's memory, in a keyring, and the jitted update looks it up when the
step *runs*, by a host callback
(:mod:`zoprivacy.secret_noise.session_lookup`): a traced input, fresh at
every execution, with no recompilation. The keyring never serves
one ``(key, step)`` pair twice:

* a handle has a *session*: a 128-bit key from OS entropy and the last step
  it served;
* a later step is served by the same session (a state stepping forward
  keeps its key, so exact noise is still drawn ahead of its step);
* the same step again, or an earlier one (a state restored or copied, then
  stepped from, in this process; a state stepped from twice), opens a new
  session with a fresh key from OS entropy, and warns
  (:class:`RecomputedStepWarning`): that computation is another release;
* a handle the process does not know (a state restored in another
  process, or one the bounded keyring forgot) opens a new session too.

So whatever a serializer writes (pickle, orbax, ``flax.serialization``, a
``copy.deepcopy``) holds no secret, and no two computations of a step share
their noise, however the state was saved and restored.
``zoprivacy.epsilon(state)`` counts the steps of one state's own path (its
``step``: those before a save and those after a restore); another
computation of a step, from a copy or a second restore, is a release it
does not see, which the warning names.

Explicit keys are the other kind: keys bound to a secret
(:func:`zoprivacy.privacy.bind_noise_secret`: the processes of one run must
add the same noise, so the runner binds its run secret) and the insecure
test keys. Their noise is a pure function of the state; whoever binds them
gives each recomputation of a step a fresh secret (the runner's attempt
rule, :mod:`zoprivacy.privacy.randomness`).

A session key also carries a public *stamp*: the fingerprint of the plan
its state's steps ran under. The plan itself is static (no leaf), so a
state restored into a template built with another plan holds the
template's plan; ``zoprivacy.epsilon(state)`` then refuses to count the
saved steps under it (:func:`plan_matches`).

The lookup is one host call per step (an ``io_callback``; the exact scalar
noise, which a step always fetched from the host, comes with it): under
``jax.jit``, on a mesh and over several processes alike, it runs once per
step, on the computation's first device (process 0's), and XLA hands its
key to every device, so every process adds the same noise. Under ``vmap``
each row is served its own key. Inside ``shard_map`` or ``pmap`` each
device would look up its own key: refused
(:mod:`zoprivacy.secret_noise.session_lookup`); bind the keys to one
shared secret there (as the runner does).
"""

from __future__ import annotations

import collections
import secrets
import threading
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

_WORDS = 4  # 128 bits: a handle and a session key alike
_MAX_SESSIONS = 4096  # forgetting a handle is safe: its next step is fresh


class RecomputedStepWarning(UserWarning):
  """A step was computed again in this process: fresh noise, one more
  release that ``zoprivacy.epsilon(state)`` of either state does not
  count."""


class SessionKey(NamedTuple):
  """The ``noise_key`` of a default estimator state: a public handle to a
  key held in this process's memory only (see the module).

  Attributes:
    handle: ``uint32[4]`` from OS entropy; it names the key, and nothing
      about the noise can be computed from it.
    plan: ``uint32[2]``, the fingerprint words of the plan that the state's
      steps ran under (:meth:`~zoprivacy.privacy.PrivacyPlan.
      fingerprint_words`), or :data:`MIXED`. A serializer writes it with
      the handle, while the plan itself comes from the template a state is
      restored into: ``zoprivacy.epsilon(state)`` refuses a state whose
      steps ran under another plan than the one it holds
      (:func:`plan_matches`).
  """

  handle: jax.Array
  plan: jax.Array


# The stamp of a state stepped under a plan its earlier steps did not use.
MIXED = (0xFFFFFFFF, 0xFFFFFFFF)


class _Session:
  __slots__ = ("words", "last", "replaces")

  def __init__(self, replaces: bool):
    self.words = _entropy_words()
    self.last = -1  # the last step served
    self.replaces = replaces  # opened for a step its handle already served


_sessions: collections.OrderedDict[bytes, _Session] = collections.OrderedDict()
_lock = threading.Lock()


def _entropy_words() -> np.ndarray:
  return np.frombuffer(secrets.token_bytes(4 * _WORDS), np.uint32).copy()


def _session_for(handle, step: int) -> _Session:
  """The session that serves ``step`` of ``handle`` (the caller holds the
  lock)."""
  name = np.asarray(handle, np.uint32).reshape(-1).tobytes()
  session = _sessions.get(name)
  if session is None or step <= session.last:
    session = _sessions[name] = _Session(replaces=session is not None)
    while len(_sessions) > _MAX_SESSIONS:
      _sessions.popitem(last=False)
  _sessions.move_to_end(name)
  return session


def _warn(step: int) -> None:
  warnings.warn(
    f"Step {step} of an estimator state was computed again in this "
    "process (a state restored or copied, or stepped from twice): it drew "
    "fresh noise, and it is one more release of the data, which "
    "zoprivacy.epsilon(state) does not count (it counts the steps of one "
    "state's own path). Count every computation.",
    RecomputedStepWarning,
    stacklevel=2,
  )


def resolve(handle, step: int) -> np.ndarray:
  """``uint32[4]``: the key that serves ``step`` of ``handle`` now; the
  step is then served (a later call for it gets a fresh key)."""
  step = int(step)
  with _lock:
    session = _session_for(handle, step)
    recomputed, session.replaces = session.replaces, False
    session.last = step
    words = session.words.copy()
  if recomputed:
    _warn(step)
  return words


def peek(handle, step: int) -> np.ndarray:
  """``uint32[4]``: the key that the next computation of ``step`` of
  ``handle`` will get (:func:`resolve`), without serving it: what a host
  sampler needs to draw that step's noise ahead of it."""
  with _lock:
    return _session_for(handle, int(step)).words.copy()


def new_session_key(plan, stamp=None) -> SessionKey:
  """A session key with a fresh handle, drawn when the code *runs* (under
  ``jit`` too: an ``io_callback`` fetches the entropy, so a jitted ``init``
  gives every execution its own handle), stamped with ``plan`` (or with
  ``stamp``, the plan words of a key it replaces)."""
  words = io_callback(
    _entropy_words, jax.ShapeDtypeStruct((_WORDS,), jnp.uint32)
  )
  if stamp is None:
    stamp = plan.fingerprint_words()
  return SessionKey(words, jnp.asarray(stamp, jnp.uint32))


def successor(key: SessionKey, plan, step) -> SessionKey:
  """The key of the state after step ``step`` under ``plan``: its stamp
  stays ``plan``'s if every earlier step ran under it (or there was none),
  else it becomes :data:`MIXED` for good."""
  words = jnp.asarray(plan.fingerprint_words(), jnp.uint32)
  kept = (jnp.asarray(step) == 0) | jnp.all(key.plan == words)
  return key._replace(
    plan=jnp.where(kept, words, jnp.asarray(MIXED, jnp.uint32))
  )


def plan_matches(key: SessionKey, plan) -> bool:
  """Whether the steps of the state holding ``key`` all ran under ``plan``
  (host side, on a concrete key)."""
  stamp = tuple(int(w) for w in np.asarray(key.plan).reshape(-1))
  return stamp == tuple(plan.fingerprint_words())


def forget_all() -> None:
  """Empties the keyring, as a new process starts (tests): every handle's
  next step then gets a fresh key."""
  with _lock:
    _sessions.clear()
