"""The host call through which a jitted step gets its secret noise.

Lowered for the CPU it is a ``buffer_callback``: the host reads the
operands and writes the noise in place (about 5 us a call);
``jax.pure_callback`` would first copy its operands into new
``jax.Array`` s (about 100 us a call). Lowered for another platform (a
GPU's buffers are not host memory), it is ``jax.pure_callback``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.secret_noise import noise_binding

try:  # JAX >= 0.7: a callback on the operands' own buffers
  from jax.experimental.buffer_callback import (
    buffer_callback as _buffer_callback,
  )
except ImportError:  # pragma: no cover
  _buffer_callback = None


def draw_on_host(host, shape: jax.ShapeDtypeStruct, noise_key, step):
  """``host(key words, step)`` called from a jitted step, returning an
  array of ``shape``; batched (``vmap``) calls pass a leading axis."""

  def pure(words, t):
    return jax.pure_callback(host, shape, words, t, vmap_method="expand_dims")

  def in_place(words, t):
    def fill(ctx, out, words, t):
      del ctx
      np.asarray(out)[...] = host(np.asarray(words), np.asarray(t))

    return _buffer_callback(fill, shape, vmap_method="expand_dims")(words, t)

  operands = (noise_binding.key_words(noise_key), jnp.asarray(step, jnp.int32))
  if _buffer_callback is None:
    return pure(*operands)
  return jax.lax.platform_dependent(*operands, cpu=in_place, default=pure)
