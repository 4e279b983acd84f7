"""One noise on every host: bind the estimators' noise keys to a run secret.

Each estimator's default noise key is a session key, whose secret (OS
entropy) stays in its process (:mod:`zoprivacy.privacy.noise_sessions`).
In a run over several processes every process calls ``init`` itself, so each
would hold its own key and add its own noise to the same clipped sum: the
"replicated" parameters would diverge, and the sum would be released once
per process with independent noise. A runner that broadcasts one run secret
to every process calls :func:`bind_noise_secret` right after ``init``: every
estimator's key is then derived from ``(run secret, the estimator's plan
fingerprint, its position in the state)``, the same on every process, so
every process adds the same noise (float or exact). Bound keys live in the
state (a checkpoint of it is secret material): :func:`refresh_noise_keys`
binds a restored state to a new secret, so that a step computed again
never reuses its noise over another sum. Both live in
:mod:`zoprivacy.privacy.noise_keys`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoprivacy.privacy.noise_keys import (  # noqa: F401 (re-exported)
  bind_noise_secret,
  estimator_states,
  refresh_noise_keys,
)


def key_words(noise_key) -> jax.Array:
  """The bits of a noise key as flat ``uint32`` words (four for the default
  128-bit ``rbg`` key)."""
  return jnp.asarray(jax.random.key_data(noise_key), jnp.uint32).reshape([-1])
