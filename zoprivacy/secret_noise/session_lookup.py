"""A session key's secret, looked up from inside a jitted step.

A default state's noise key is a
:class:`~zoprivacy.privacy.noise_sessions.SessionKey`: a public handle
whose secret stays in this process's keyring, which serves each ``(key,
step)`` once. The step looks the secret up when it runs, by one
``io_callback``: a host call with a side effect (the keyring records the
step served), so XLA never drops it, never runs it twice for one execution
and, on a mesh, runs it on one device and hands its result to every
device. Under ``vmap`` it serves each row in turn.

* :func:`resolve_in_jit`: the step's explicit ``rbg`` key (float noise,
  exact vector noise);
* :func:`resolve_and_draw`: the key and the step's exact scalar noise in
  the same host call, drawn by the prefetching host sampler of that key
  (:func:`zoprivacy.secret_noise.host_noise.source_for`): a step that
  always fetched its noise from the host makes no more calls than before.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from zoprivacy.privacy import noise_sessions
from zoprivacy.secret_noise import host_noise

_KEY = jax.ShapeDtypeStruct((4,), jnp.uint32)


def _operands(key, step):
  return jnp.asarray(key.handle, jnp.uint32), jnp.asarray(step, jnp.int32)


def _wrap(words) -> jax.Array:
  return jax.random.wrap_key_data(words, impl="rbg")


def resolve_in_jit(key: noise_sessions.SessionKey, step) -> jax.Array:
  """The 128-bit ``rbg`` key that serves ``step`` of ``key``, looked up
  when the computation runs."""

  def host(handle, t):
    return noise_sessions.resolve(handle, int(np.asarray(t)))

  return _wrap(io_callback(host, _KEY, *_operands(key, step)))


def resolve_and_draw(plan, key: noise_sessions.SessionKey, step):
  """``(rbg key, int32[num_queries] noise)``: the key that serves ``step``
  of ``key`` and the exact noise of ``plan`` it draws at that step, from
  one host call."""
  shapes = (_KEY, jax.ShapeDtypeStruct((plan.num_queries,), jnp.int32))

  def host(handle, t):
    t = int(np.asarray(t))
    words = noise_sessions.resolve(handle, t)
    noise = host_noise.source_for(plan, words).draw(t)
    return words, np.asarray(noise, np.int32)

  words, noise = io_callback(host, shapes, *_operands(key, step))
  return _wrap(words), noise
