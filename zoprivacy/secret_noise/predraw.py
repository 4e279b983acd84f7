"""The first step's exact noise, drawn before the step.

The exact samplers take longer for larger noise values, so every step's
noise is drawn ahead of the step (blocks of scalar steps,
:class:`~zoprivacy.secret_noise.exact_noise.ExactNoiseSource`; vectors a
few steps ahead, :mod:`~zoprivacy.secret_noise.vector_noise_prefetch`, when
the host sampler draws them). The first step after a start, a resume or new
noise keys has nothing drawn yet: :func:`predraw` draws it, and waits,
before that step runs. Exact vector noise drawn on the device (the default)
is part of the step, in constant time, and needs no predraw.

Library use, after ``init`` or a restore (and once the step is traced)::

    with vector_noise_prefetch.recording() as draws:
      step.trace(params, state, batch)   # jax.jit(...).trace: no execution
    predraw(state, draws)
"""

from __future__ import annotations

import jax
import numpy as np

from zoprivacy.privacy import noise_keys
from zoprivacy.secret_noise import host_noise, noise_binding
from zoprivacy.secret_noise import vector_noise_prefetch as vnp


def _local(x):
  """``x`` as an array of this process (a replicated global array's own
  copy)."""
  if isinstance(x, jax.Array) and not x.is_fully_addressable:
    return x.addressable_data(0)
  return x


def _local_key(est):
  """The explicit key of ``est``'s next step, as an array of this process
  (a session key: the one this process's keyring will serve)."""
  key = noise_keys.explicit_key(est, local=_local)
  data = _local(jax.random.key_data(key))
  return jax.random.wrap_key_data(
    np.asarray(data), impl=jax.random.key_impl(key)
  )


def predraw(opt_state, vector_draws=(), *, in_jit_scalar: bool = True):
  """Draws the exact noise of the next step of every estimator state in
  ``opt_state``, and waits for it.

  Args:
    opt_state: an optax state (any tree holding estimator states).
    vector_draws: the :class:`~zoprivacy.secret_noise.vector_noise_prefetch.
      VectorDraw` a traced step makes (:func:`vector_noise_prefetch.
      recording`), for the states whose plan is exact vector noise.
    in_jit_scalar: also draw the block of the scalar exact noise an update
      draws by itself (off when the caller passes ``discrete_noise=``).
  """
  draws = sorted(set(vector_draws))
  waits = []
  for est in noise_keys.estimator_states(opt_state):
    kind = est.privacy_plan.noise_kind
    step = int(np.asarray(_local(est.step)))
    key = _local_key(est)
    if kind == "discrete" and in_jit_scalar:
      words = np.asarray(noise_binding.key_words(key))
      host_noise.source_for(est.privacy_plan, words).warm(step)
    elif kind == "discrete_vector" and draws:
      # Only the host sampler records draws when the step is traced: the
      # device sampler (the default) draws inside the jitted step in a time
      # that depends only on (sigma, size), so it has nothing to predraw.
      base = vnp.noise_step(est._replace(noise_key=key))
      for path, sigma, size in draws:
        part = base
        for index in path:
          part = part.part(index)
        words = np.asarray(noise_binding.key_words(part.key))
        source = vnp.source_for(words, sigma, size)
        source.prefetch(step)
        waits.append((source, step))
  for source, step in waits:
    source.join(step)
