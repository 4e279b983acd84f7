"""Exact noise inside a jitted update: a host callback to the host sampler.

An exact-noise estimator's ``update`` needs the step's integer noise. When
the caller passes none (the plain ``tx.update(...)`` call), the update asks
the host for it with :func:`draw_in_jit`: a host callback that hands the
estimator's secret noise key and the step to
:class:`~zoprivacy.privacy.ExactNoiseSource` (exact samplers on SHAKE-256
streams keyed by ``(key, plan fingerprint, step)``) and returns
``int32[num_queries]``. Lowered for the CPU it is
``jax.experimental.buffer_callback``, which reads the operands and writes
the noise in place; lowered for another platform it is
``jax.pure_callback``.

* Under ``jit``: the callback runs at every execution (it is not constant
  folded: its operands are traced). It is declared pure (no side effect):
  the draw is a deterministic function of ``(key, plan, step)``, so XLA may
  run it again or drop an unused one without changing any release (a
  re-run step gets the same noise). Under ``vmap`` (an audit's one key per
  trial) it is called once with the whole batch of keys.
* On a mesh: the operands are replicated. ``pure_callback`` runs once, on
  one device, and XLA broadcasts its result; the CPU's
  ``buffer_callback`` runs on every device, each drawing the same
  deterministic noise from the same cached source. Either way every
  device adds the same noise after the cross-device sum.
* On several processes: each process runs the callback itself. They add
  the same noise when their estimators' keys are the same, which
  :func:`zoprivacy.secret_noise.bind_noise_secret` ensures.
* Timing: the sources are cached per (key, plan) and prefetch blocks of
  future steps in a background thread, so a step's time does not depend on
  its noise value.
"""

from __future__ import annotations

import collections
import functools
import threading

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.privacy import randomness
from zoprivacy.secret_noise import host_callback
from zoprivacy.secret_noise.exact_noise import ExactNoiseSource

_CACHE_SIZE = 8
_sources: collections.OrderedDict = collections.OrderedDict()
_lock = threading.Lock()


def source_for(plan, words) -> ExactNoiseSource:
  """The cached source of ``(plan, key words)`` (LRU, 8 entries)."""
  index = (np.asarray(words, np.uint32).tobytes(), plan)
  with _lock:
    source = _sources.get(index)
    if source is None:
      secret = randomness.secret_from_key_data(words)
      source = ExactNoiseSource(plan, secret)
      _sources[index] = source
      while len(_sources) > _CACHE_SIZE:
        _sources.popitem(last=False)
    _sources.move_to_end(index)
  return source


def _host_draw(plan, words, t) -> np.ndarray:
  """The noise of each (key words, step) pair, broadcast together:
  ``int32[batch..., num_queries]``."""
  words, t = np.asarray(words), np.asarray(t)
  if words.ndim == 1 and t.ndim == 0:  # a training step: the cached source
    return source_for(plan, words).draw(int(t))
  batch = np.broadcast_shapes(words.shape[:-1], t.shape)
  words = np.broadcast_to(words, batch + words.shape[-1:]).reshape(
    -1, words.shape[-1]
  )
  t = np.broadcast_to(t, batch).reshape(-1)
  if len(t) == 1:  # a training step: the cached, prefetching source
    out = [source_for(plan, words[0]).draw(int(t[0]))]
  else:  # one key per trial (an audit): each step drawn on demand
    out = [
      ExactNoiseSource(
        plan, randomness.secret_from_key_data(w), block_size=0
      ).draw_now(int(s))
      for w, s in zip(words, t)
    ]
  return np.stack(out).reshape(batch + (plan.num_queries,)).astype(np.int32)


def draw_in_jit(plan, noise_key, step) -> jax.Array:
  """The ``int32[num_queries]`` exact noise of ``step``, for ``noise_key``
  (the estimator's base key, not a per-step key) under ``plan``.

  Drawn through :func:`zoprivacy.secret_noise.host_callback.draw_on_host`
  (in place on the CPU).
  """
  shape = jax.ShapeDtypeStruct((plan.num_queries,), jnp.int32)
  return host_callback.draw_on_host(
    functools.partial(_host_draw, plan), shape, noise_key, step
  )
