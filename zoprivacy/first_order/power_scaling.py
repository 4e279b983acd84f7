"""Per-example scaling by powers of two, exact in float32.

Ghost clipping's certified bounds (:mod:`zoprivacy.first_order.
ghost_certified`) scale each example's factors by ``2^-k`` before squaring
(so that squares of tiny values do not flush to zero) and unscale the
clipping factor in exact power-of-two steps. Every step here multiplies by
a power of two built from its bit pattern: exact wherever the result stays
in the normal range.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

LOW = -100  # the least scale exponent (examples of smaller values)


def pow2(k):
  """``2^k`` in float32, exactly, for integers ``k`` (held to ``[-126,
  127]``: the normal range), from its bit pattern."""
  k = jnp.clip(jnp.asarray(k, jnp.int32), -126, 127)
  return jax.lax.bitcast_convert_type((k + 127) << 23, jnp.float32)


class Scaled(NamedTuple):
  """Per-example factors scaled by a power of two: ``values`` (``v
  2^-k``, every entry below 1 in magnitude), ``exponent`` (``k [B]``),
  ``rho`` (``[B]``: how far an entry may have moved, flushes included)
  and ``ok`` (``[B]``: finite and below the limit)."""

  values: jax.Array
  exponent: jax.Array
  rho: jax.Array
  ok: jax.Array


def per_row(x, like):
  return x.reshape((-1,) + (1,) * (like.ndim - 1))


def scale(values, limit: int) -> Scaled:
  """:class:`Scaled` of ``values [B, ...]``: ``k`` the exponent of each
  example's largest ``|v|`` (``max |v| < 2^k``, ``k >= LOW``); an example
  at or above ``2^limit`` or not finite is not ``ok``."""
  top = jnp.max(jnp.abs(values).reshape(values.shape[0], -1), axis=1)
  _, k = jnp.frexp(top)
  k = jnp.maximum(k.astype(jnp.int32), LOW)
  ok = jnp.isfinite(top) & (k <= limit) & (top * pow2(-k) < 1.0)
  out = values * per_row(pow2(-k), values).astype(values.dtype)
  rho = pow2(-124 - jnp.minimum(k, 0))
  return Scaled(out, k, rho, ok)


def one_hot(valid) -> Scaled:
  """An embedding's inputs ``[B, T] -> [B, T, 1]``: one-hot rows (norm 1
  or 0, exact), unscaled."""
  rows = valid.shape[0]
  zero = jnp.zeros((rows,), jnp.int32)
  return Scaled(
    valid.astype(jnp.float32)[..., None],
    zero,
    jnp.zeros((rows,), jnp.float32),
    jnp.ones((rows,), bool),
  )


def unscale_at_most_one(q, exponent):
  """``min(1, q 2^-exponent)`` in exact power-of-two steps; 0 where ``q``
  is not finite or the result falls below ``2^-125`` (a rounded subnormal
  may exceed the true value)."""
  shift = -jnp.asarray(exponent, jnp.int32)
  half = jnp.floor_divide(shift, 2)  # both steps of the same sign
  c = q * pow2(half) * pow2(shift - half)
  c = jnp.where(c >= 1.0, 1.0, c)
  return jnp.where(jnp.isfinite(q) & (c >= 2.0**-125), c, 0.0)
