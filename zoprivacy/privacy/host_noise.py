"""Exact noise inside a jitted update: a host callback to the host sampler.

An exact-noise estimator's ``update`` needs the step's integer noise. When
the caller passes none (the plain ``tx.update(...)`` call), the update asks
the host for it with :func:`draw_in_jit`: a host callback
(``jax.pure_callback``: the draw is a pure function of its operands) that
hands the estimator's secret noise key and the step to
:class:`~zoprivacy.privacy.ExactNoiseSource` (exact samplers on SHAKE-256
streams keyed by ``(key, plan fingerprint, step)``) and returns
``int32[num_queries]``.

* Under ``jit``: the callback runs at every execution (it is not constant
  folded: its operands are traced). It is declared pure: the draw is a
  deterministic function of ``(key, plan, step)``, so XLA may run it again
  or drop an unused one without changing any release (a re-run step gets
  the same noise). Under ``vmap`` (an audit's one key per trial) it is
  called once with the whole batch of keys.
* On a mesh: the operands are replicated and the callback runs once, on
  one device; XLA broadcasts its result, so every device adds the same
  noise after the cross-device sum.
* On several processes: each process runs the callback itself. They add
  the same noise when their estimators' keys are the same, which
  :func:`zoprivacy.privacy.bind_noise_secret` ensures.
* Timing: the sources are cached per (key, plan) and prefetch blocks of
  future steps in a background thread, so a step's time does not depend on
  its noise value.
"""

from __future__ import annotations

import collections
import threading

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.privacy import randomness
from zoprivacy.privacy.exact_noise import ExactNoiseSource

_CACHE_SIZE = 8
_sources: collections.OrderedDict = collections.OrderedDict()
_lock = threading.Lock()


def source_for(plan, words) -> ExactNoiseSource:
  """The cached source of ``(plan, key words)`` (LRU, 8 entries)."""
  secret = randomness.secret_from_key_data(words)
  index = (secret, plan)
  with _lock:
    source = _sources.get(index)
    if source is None:
      source = ExactNoiseSource(plan, secret)
      _sources[index] = source
      while len(_sources) > _CACHE_SIZE:
        _sources.popitem(last=False)
    _sources.move_to_end(index)
  return source


def draw_in_jit(plan, noise_key, step) -> jax.Array:
  """The ``int32[num_queries]`` exact noise of ``step``, for ``noise_key``
  (the estimator's base key, not a per-step key) under ``plan``."""
  from zoprivacy.privacy import noise_binding  # pylint: disable=g-import-not-at-top

  q = plan.num_queries

  def host(words, t):
    words, t = np.asarray(words), np.asarray(t)
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
    return np.stack(out).reshape(batch + (q,)).astype(np.int32)

  shape = jax.ShapeDtypeStruct((q,), jnp.int32)
  words = noise_binding.key_words(noise_key)
  return jax.pure_callback(
    host, shape, words, jnp.asarray(step, jnp.int32), vmap_method="expand_dims"
  )
