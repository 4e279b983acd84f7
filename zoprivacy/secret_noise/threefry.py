"""Threefry-4x32-20 (Salmon et al. 2011) in 32-bit JAX integer code.

The counter-based generator of the device samplers of secret noise
(:mod:`zoprivacy.secret_noise.device_discrete_gaussian`): a 128-bit key
(the four words of the estimator's secret ``rbg`` noise key, bound to the
plan) and a 128-bit counter give 128 output bits. Only additions,
rotations and exclusive-ors of ``uint32`` words, so XLA vectorizes it on
the CPU (4.2M words in about 36 ms on a loaded 2-core machine, against
several hundred for ``jax.random.bits``) and it runs unchanged on a GPU.
Its key is 128 bits, the size of the secret it is keyed by (JAX's own
``threefry2x32`` has a 64-bit key).

Rounds and rotation constants are Random123's ``threefry4x32`` with 20
rounds; the module's test checks the Random123 known-answer vectors.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

ROUNDS = 20
_ROTATIONS = (
  (10, 26),
  (11, 21),
  (13, 27),
  (23, 5),
  (6, 20),
  (17, 11),
  (25, 10),
  (18, 20),
)
_PARITY = np.uint32(0x1BD11BDA)


def _rotl(x, r: int):
  return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry4x32(key, counter):
  """The four ``uint32`` output words of ``Threefry-4x32-20(key, counter)``.

  ``key``: four ``uint32`` scalars; ``counter``: four ``uint32`` arrays
  (broadcast together). Returns a list of four arrays.
  """
  key = [jnp.asarray(k, jnp.uint32) for k in key]
  ks = key + [key[0] ^ key[1] ^ key[2] ^ key[3] ^ _PARITY]
  x = [jnp.asarray(c, jnp.uint32) + ks[i] for i, c in enumerate(counter)]
  for r in range(ROUNDS):
    a, b = _ROTATIONS[r % 8]
    if r % 2 == 0:
      x[0] = x[0] + x[1]
      x[1] = _rotl(x[1], a) ^ x[0]
      x[2] = x[2] + x[3]
      x[3] = _rotl(x[3], b) ^ x[2]
    else:
      x[0] = x[0] + x[3]
      x[3] = _rotl(x[3], a) ^ x[0]
      x[2] = x[2] + x[1]
      x[1] = _rotl(x[1], b) ^ x[2]
    if r % 4 == 3:
      s = r // 4 + 1
      x = [x[i] + ks[(s + i) % 5] for i in range(4)]
      x[3] = x[3] + np.uint32(s)
  return x


def words(key, num_blocks: int, *tags):
  """``4 x uint32[num_blocks]``: blocks ``0`` to ``num_blocks - 1`` of the
  stream ``(key, tags)``; the counter is ``(block, *tags)``, with three
  ``uint32`` tags (scalars, traced or not) that name the stream."""
  if len(tags) != 3:
    raise ValueError("words() takes three counter tags.")
  block = jnp.arange(num_blocks, dtype=jnp.uint32)
  tags = [jnp.asarray(t).astype(jnp.uint32) for t in tags]
  return threefry4x32(key, [block, *tags])
