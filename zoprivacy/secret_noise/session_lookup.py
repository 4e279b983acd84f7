"""A session key's secret, looked up from inside a jitted step.

A default state's noise key is a
:class:`~zoprivacy.privacy.noise_sessions.SessionKey`: a public handle
whose secret stays in this process's keyring, which serves each ``(key,
step)`` once. The step looks the secret up when it runs, by one
``io_callback``: a host call with a side effect (the keyring records the
step served), so XLA never drops it and never runs it twice for one
execution. Under ``jax.jit``, on a mesh and over several processes alike,
it runs once, on the computation's first device, and XLA hands its key to
every device (the handle that other processes hold is not read).

* :func:`keyed_with_noise`: the step's state with an explicit key, and
  its exact scalar noise drawn in the same host call, by the prefetching
  host sampler of that key
  (:func:`zoprivacy.secret_noise.host_noise.source_for`): a step that
  always fetched its noise from the host makes no more calls than before;
* :func:`keyed_state`: the explicit key alone (float noise, exact vector
  noise).

The lookup takes the step's inputs as an operand (:func:`input_tie`, whose
value it ignores): under ``vmap`` over anything that changes the released
sum (other batches, other parameters, other direction keys, from one
state), the lookup is mapped too and each row is served its own key. A
lookup inside ``shard_map`` or ``pmap`` would run once per device, and
every device would add its own noise to the same sum: refused, with what
to do instead (:func:`refuse_per_device`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from zoprivacy.privacy import noise_sessions
from zoprivacy.secret_noise import host_noise

_KEY = jax.ShapeDtypeStruct((4,), jnp.uint32)


def input_tie(*trees) -> jax.Array:
  """A ``bool`` scalar (``False``) that depends on every traced array in
  ``trees``: passed to the lookup, it makes ``vmap`` over any of them map
  the lookup, one key per row (rows that shared one lookup would add the
  same noise to different sums, and their difference would be
  noise-free). Comparisons carry no gradient."""
  tie = jnp.zeros((), bool)
  for x in jax.tree.leaves(trees):
    if not isinstance(x, jax.core.Tracer) or not x.size:
      continue  # a constant cannot be mapped over
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
      x = jax.random.key_data(x)
    first = jnp.ravel(x)[0]
    tie = tie & (first != first)
  return tie


def refuse_per_device() -> None:
  """Raises inside ``shard_map`` or ``pmap`` (a program written per
  device), where each device would look up its own key."""
  current = getattr(jax.sharding, "get_abstract_mesh", lambda: None)
  manual = getattr(current(), "manual_axes", ())
  if manual:
    raise ValueError(
      f"This estimator state's noise key is a session key, looked up when "
      f"the step runs; inside shard_map or pmap (manual axes "
      f"{tuple(manual)}) every device would look up its own key and add "
      "its own noise to the same sum (several releases, diverging "
      "replicas). Step it under jax.jit with the mesh's shardings instead "
      "(the lookup then runs once and every device shares its key), or "
      "bind the keys to one secret shared by every device and process "
      "first: zoprivacy.privacy.bind_noise_secret(opt_state, secret), with "
      "32 bytes from secrets.token_bytes drawn on process 0 and broadcast "
      "(jax.experimental.multihost_utils.broadcast_one_to_all). Bound keys "
      "are explicit: bind a restored state to a new secret before stepping "
      "it again."
    )


def _operands(key, step, tie):
  return jnp.asarray(key.handle, jnp.uint32), jnp.asarray(step, jnp.int32), tie


def _wrap(words) -> jax.Array:
  return jax.random.wrap_key_data(words, impl="rbg")


def resolve_in_jit(key: noise_sessions.SessionKey, step, tie) -> jax.Array:
  """The 128-bit ``rbg`` key that serves ``step`` of ``key``, looked up
  when the computation runs."""

  def host(handle, t, _):
    return noise_sessions.resolve(handle, int(np.asarray(t)))

  return _wrap(io_callback(host, _KEY, *_operands(key, step, tie)))


def resolve_and_draw(plan, key: noise_sessions.SessionKey, step, tie):
  """``(rbg key, int32[num_queries] noise)``: the key that serves ``step``
  of ``key`` and the exact noise of ``plan`` it draws at that step, from
  one host call."""
  shapes = (_KEY, jax.ShapeDtypeStruct((plan.num_queries,), jnp.int32))

  def host(handle, t, _):
    t = int(np.asarray(t))
    words = noise_sessions.resolve(handle, t)
    noise = host_noise.source_for(plan, words).draw(t)
    return words, np.asarray(noise, np.int32)

  words, noise = io_callback(host, shapes, *_operands(key, step, tie))
  return _wrap(words), noise


def keyed_with_noise(state, discrete_noise=None, *, draw_exact=True, inputs=()):
  """``(state, discrete_noise)`` for an estimator state's current step:
  ``state`` with an explicit noise key, and the step's exact scalar noise
  (the caller's ``discrete_noise`` if given; drawn on the host for an
  exact scalar plan unless ``draw_exact`` is off; else ``None``).

  A session key is looked up now (one host call that also draws the exact
  scalar noise), which serves the step: call this once per computed step,
  with the step's other ``inputs`` (parameters, batch, ...: see
  :func:`input_tie`), and return the successor of the *given* state (its
  session key, not the key looked up). A plan without noise needs no key:
  the handle stands in.
  """
  plan, key = state.privacy_plan, state.noise_key
  draw = draw_exact and plan.noise_kind == "discrete"
  draw = draw and discrete_noise is None
  if isinstance(key, noise_sessions.SessionKey):
    if not plan.is_noised:
      explicit = _wrap(jnp.asarray(key.handle, jnp.uint32))
    else:
      refuse_per_device()
      tie = input_tie(state, inputs)
      if draw:
        explicit, discrete_noise = resolve_and_draw(plan, key, state.step, tie)
        draw = False
      else:
        explicit = resolve_in_jit(key, state.step, tie)
    state = state._replace(noise_key=explicit)
  if draw:
    discrete_noise = host_noise.draw_in_jit(plan, state.noise_key, state.step)
  return state, discrete_noise


def keyed_state(state, inputs=()):
  """``state`` with an explicit noise key for its current step (see
  :func:`keyed_with_noise`; for a step that draws no exact scalar noise
  from the host)."""
  return keyed_with_noise(state, draw_exact=False, inputs=inputs)[0]
