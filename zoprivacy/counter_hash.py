"""A counter-based generator for public directions: bits as a hash of (key, index).

Directions are public, so what matters is speed and statistical quality, not
secrecy (the privacy noise keeps its own secret threefry key). JAX's
threefry draws on CPU cost several times the two forward passes of a
zeroth-order step and allocate temporaries of about three times the drawn
size. Here every 32-bit output is a pure function of the key, a leaf number
and the element's position, computed with a few integer multiplies and
shifts that XLA fuses into whatever consumes the direction: no temporaries,
and any slice (one layer of a scanned stack, one shard of a sharded leaf)
is drawn alone and equals the same slice of the full draw.

Construction, per 32-bit output at position ``i`` of leaf ``l`` under key
words ``(w0, w1)``, with ``k0 = mix_b(w0 ^ s0)`` and ``k1 = mix_a(w1 ^ s1)``
for two fixed salts (so that the all-zero key is not a fixed point)::

    a = mix_a(i * phi  ^ k0 ^ mix_b(l + k1))      a bijection of i
    b = mix_b(a ^ k1)                              a bijection of a
    c = mix_a(i ^ rot(k1, 16) ^ mix_a(l ^ k0))     an independent lane
    out = b ^ c

``mix_a`` and ``mix_b`` are the two "lowbias32"/"triple32"-style 32-bit
integer finalizers found by C. Wellons' hash-prospector (multiply by an odd
constant and xor-shift, three rounds; each is a bijection with avalanche
bias about 0.02-0.1%). Xoring two lanes makes the map from ``i`` to ``out``
not a permutation, so 32-bit outputs collide as often as independent
uniform words do (a permutation would fail a birthday-spacings test).
The statistical tests run on it are listed in ``docs/directions.md``.

Transforms: Rademacher takes the top bit; a uniform in ``(0, 1)`` takes the
top 23 bits plus a half step; the Gaussian is the inverse-CDF transform
``sqrt(2) erfinv(s)`` that ``jax.random.normal`` also uses, on a symmetric
23-bit grid ``s`` (tails reach 5.3 sigma, JAX's float32 normal 5.4), with
Giles' single-precision ``erfinv`` evaluated from ``log((1 - s)(1 + s))``
(more accurate on the grid than XLA's ``erf_inv``, and cheaper).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

_PHI = np.uint32(0x9E3779B9)  # 2^32 / golden ratio: spreads the counter
_K0_SALT = np.uint32(0x85EBCA6B)  # arbitrary odd constants (MurmurHash3's)
_K1_SALT = np.uint32(0xC2B2AE35)


def _mix_a(x: jax.Array) -> jax.Array:
  """A 32-bit bijective finalizer ("lowbias32", Wellons 2018)."""
  x = x ^ (x >> 16)
  x = x * np.uint32(0x7FEB352D)
  x = x ^ (x >> 15)
  x = x * np.uint32(0x846CA68B)
  return x ^ (x >> 16)


def _mix_b(x: jax.Array) -> jax.Array:
  """A second, independent bijective finalizer ("triple32", Wellons 2018)."""
  x = x ^ (x >> 17)
  x = x * np.uint32(0xED5AD4BB)
  x = x ^ (x >> 11)
  x = x * np.uint32(0xAC4C1B51)
  x = x ^ (x >> 15)
  x = x * np.uint32(0x31848BAB)
  return x ^ (x >> 14)


def key_words(key: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The two 32-bit words of a threefry key (typed or raw ``uint32[2]``)."""
  if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
    key = jax.random.key_data(key)
  data = jnp.asarray(key, jnp.uint32).reshape(-1)
  return data[0], data[-1]


def bits(
  key: jax.Array, leaf: int | jax.Array, positions: jax.Array
) -> jax.Array:
  """``uint32`` outputs for the element ``positions`` of leaf ``leaf``.

  ``positions`` are flat element indices within the leaf (any shape, any
  integer dtype below 2^32); the result has their shape. The same
  ``(key, leaf, position)`` always gives the same word, whatever else is
  drawn alongside it.
  """
  k0, k1 = key_words(key)
  k0 = _mix_b(k0 ^ _K0_SALT)  # so that key 0 does not give the fixed point 0
  k1 = _mix_a(k1 ^ _K1_SALT)
  i = positions.astype(jnp.uint32)
  leaf = jnp.asarray(leaf, jnp.uint32)
  rot_k1 = (k1 << 16) | (k1 >> 16)
  a = _mix_a((i * _PHI) ^ k0 ^ _mix_b(leaf + k1))
  b = _mix_b(a ^ k1)
  c = _mix_a(i ^ rot_k1 ^ _mix_a(leaf ^ k0))
  return b ^ c


def leaf_bits(
  key: jax.Array, leaf: int, shape, *, start: int | jax.Array = 0
) -> jax.Array:
  """Outputs for a leaf of ``shape``, or for its slice of that shape from
  flat position ``start`` (a layer of a stacked leaf, a shard)."""
  size = 1
  for n in shape:
    size *= int(n)
  if size >= 2**32:
    raise ValueError(
      f"A leaf of {size} elements exceeds the 2^32 positions of one leaf; "
      "split it into several leaves."
    )
  positions = jax.lax.iota(jnp.uint32, size).reshape(shape)
  return bits(key, leaf, positions + jnp.asarray(start, jnp.uint32))


def to_rademacher(words: jax.Array, dtype) -> jax.Array:
  """``+-1`` from the top bit of each word."""
  return jnp.where(words >> 31 == 1, 1.0, -1.0).astype(dtype)


def to_uniform(words: jax.Array) -> jax.Array:
  """Float32 uniform in ``(0, 1)``: ``(m + 1/2) / 2^23`` for the top 23 bits
  ``m`` (exact in float32: never 0 or 1)."""
  m = (words >> 9).astype(jnp.float32)
  return (m + 0.5) * np.float32(2.0**-23)


# Giles (2010), "Approximating the erfinv function", single precision: a
# degree-8 polynomial in ``w - 2.5`` for ``w < 5`` (``|s| < 0.9966``) and in
# ``sqrt(w) - 3`` beyond, ``w = -log(1 - s^2)``. The same coefficients as
# XLA's ``erf_inv``; highest degree first.
_ERFINV_CENTRAL = (
  2.81022636e-08,
  3.43273939e-07,
  -3.5233877e-06,
  -4.39150654e-06,
  0.00021858087,
  -0.00125372503,
  -0.00417768164,
  0.246640727,
  1.50140941,
)
_ERFINV_TAIL = (
  -0.000200214257,
  0.000100950558,
  0.00134934322,
  -0.00367342844,
  0.00573950773,
  -0.0076224613,
  0.00943887047,
  1.00167406,
  2.83297682,
)


def erfinv_on_grid(s: jax.Array) -> jax.Array:
  """``erfinv(s)`` in float32 for ``|s| < 1`` (Giles 2010).

  ``w = -log((1 - s)(1 + s))``: on the generator's grid (multiples of
  ``2^-23``) both factors are exact, so ``w`` carries one rounding, and
  ``log`` is cheaper than the ``log1p(-s^2)`` of XLA's ``erf_inv``. Both
  branches' polynomials are evaluated and one is selected: no per-element
  select of coefficients. Over all ``2^23`` grid points the relative error
  against float64 is at most 2.6e-7 (XLA's ``erf_inv``: 5.8e-6, in the
  tails), at about 0.7x its time on CPU. Odd in ``s`` to the bit.
  """
  w = -jnp.log((1.0 - s) * (1.0 + s))
  central_w = w - np.float32(2.5)
  tail_w = jnp.sqrt(w) - np.float32(3.0)
  central = np.float32(_ERFINV_CENTRAL[0])
  tail = np.float32(_ERFINV_TAIL[0])
  for a, b in zip(_ERFINV_CENTRAL[1:], _ERFINV_TAIL[1:]):
    central = np.float32(a) + central * central_w
    tail = np.float32(b) + tail * tail_w
  return jnp.where(w < np.float32(5.0), central, tail) * s


def to_gaussian(words: jax.Array, dtype) -> jax.Array:
  """Standard normal by the inverse CDF, ``sqrt(2) erfinv(s)``.

  ``s = (2m + 1 - 2^23) / 2^23`` for the top 23 bits ``m``: the odd
  multiples of ``2^-23`` in ``(-1, 1)``, exact in float32 and symmetric, so
  ``|z| <= 5.3`` and the distribution is exactly symmetric
  (:func:`erfinv_on_grid`).
  """
  m = (words >> 9).astype(jnp.int32)
  s = (2 * m + (1 - 2**23)).astype(jnp.float32) * np.float32(2.0**-23)
  z = np.float32(np.sqrt(2.0)) * erfinv_on_grid(s)
  return z.astype(dtype)
