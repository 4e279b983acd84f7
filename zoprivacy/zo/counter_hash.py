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

A position of 2^32 or more (a stacked leaf of many layers) is ``i +
2^32 h``: ``i`` as above, and its high word ``h`` keys both lanes, ``mix_b(l
+ k1)`` xored with ``mix_b(h (k1 | 1))`` and ``mix_a(l ^ k0)`` with ``mix_a(h
(k0 | 1))``; both are 0 where ``h`` is 0, so that every position below 2^32
keeps its word (``zoprivacy/zo/counter_positions.py``).

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
23-bit grid ``s`` (tails reach 5.3 sigma, JAX's float32 normal 5.4),
evaluated as a rational function of ``w = -log((1 - s)(1 + s))`` (Giles'
variable) with a bit-level log: more accurate on the grid than XLA's
``erf_inv``, at about half its time.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.zo import counter_positions

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
  key: jax.Array,
  leaf: int | jax.Array,
  positions: jax.Array | counter_positions.Positions,
) -> jax.Array:
  """``uint32`` outputs for the element ``positions`` of leaf ``leaf``.

  ``positions`` are flat element indices within the leaf: ``uint32`` (any
  shape, any integer dtype below 2^32), or
  :class:`~zoprivacy.zo.counter_positions.Positions` beyond 2^32, whose
  high word is folded into the leaf's key words (0 where it is 0: the same
  words as ``uint32`` positions). The result has their shape. The same
  ``(key, leaf, position)`` always gives the same word, whatever else is
  drawn alongside it.
  """
  k0, k1 = salted_key_words(key)
  leaf = jnp.asarray(leaf, jnp.uint32)
  lane_a = _mix_b(leaf + k1)
  lane_c = _mix_a(leaf ^ k0)
  if isinstance(positions, counter_positions.Positions):
    lane_a = lane_a ^ counter_positions.per_position(positions, k1, _mix_b)
    lane_c = lane_c ^ counter_positions.per_position(positions, k0, _mix_a)
    positions = positions.low
  i = positions.astype(jnp.uint32)
  rot_k1 = (k1 << 16) | (k1 >> 16)
  a = _mix_a((i * _PHI) ^ k0 ^ lane_a)
  b = _mix_b(a ^ k1)
  c = _mix_a(i ^ rot_k1 ^ lane_c)
  return b ^ c


def salted_key_words(key: jax.Array) -> tuple[jax.Array, jax.Array]:
  """``(k0, k1)``: the key's words mixed with two salts (so that key 0 does
  not give the fixed point 0)."""
  k0, k1 = key_words(key)
  return _mix_b(k0 ^ _K0_SALT), _mix_a(k1 ^ _K1_SALT)


def leaf_bits(key: jax.Array, leaf: int, shape, *, start=0) -> jax.Array:
  """Outputs for a leaf of ``shape``, or for its slice of that shape from
  flat position ``start`` (a layer of a stacked leaf, a shard): a Python
  integer of any size, a traced integer below 2^32 or a
  :class:`~zoprivacy.zo.counter_positions.Offset`."""
  return bits(key, leaf, counter_positions.leaf_positions(shape, start))


def to_rademacher(words: jax.Array, dtype) -> jax.Array:
  """``+-1`` from the top bit of each word."""
  return jnp.where(words >> 31 == 1, 1.0, -1.0).astype(dtype)


def to_uniform(words: jax.Array) -> jax.Array:
  """Float32 uniform in ``(0, 1)``: ``(m + 1/2) / 2^23`` for the top 23 bits
  ``m`` (exact in float32: never 0 or 1)."""
  m = (words >> 9).astype(jnp.float32)
  return (m + 0.5) * np.float32(2.0**-23)


# The natural log of a positive normal float32 ``v = 2^k m`` with ``m`` in
# ``[sqrt(1/2), sqrt(2))``: ``k log 2 + log1p(f)``, ``f = m - 1``, with
# ``log1p(f) = f + f^2 P(f)`` and ``P`` of degree 7, fitted here to minimax
# relative error over ``f`` in ``[sqrt(1/2) - 1, sqrt(2) - 1]`` (3.0e-8 in
# float64). Lowest degree first.
_LOG1P_OVER_F_SQUARED = (
  -0.49999991059303284,
  0.33333951234817505,
  -0.2500172257423401,
  0.19961979985237122,
  -0.16571274399757385,
  0.14919734001159668,
  -0.14302605390548706,
  0.0872369334101677,
)
_SQRT_HALF_BITS = np.int32(0x3F3504F3)  # float32 bits of sqrt(1/2)

# ``sqrt(2) erfinv(s) / s`` as a function of ``w = -log(1 - s^2)``: a
# (5, 5) rational ``N(w) / D(w)``, fitted here to minimax relative error
# over every ``w`` of the generator's grid (``w`` in ``[0, 15.9]``;
# 1.5e-8 in float64). ``N(0) = sqrt(pi / 2)``. Lowest degree first.
_QUANTILE_NUMERATOR = (
  1.2533141374588013,
  0.4302695095539093,
  0.08343372493982315,
  0.010869783349335194,
  0.0009034808026626706,
  3.600347554311156e-05,
)
_QUANTILE_DENOMINATOR = (
  1.0,
  0.0815061554312706,
  0.03219959884881973,
  0.0018167264061048627,
  0.00018393396749161184,
  1.3771477824775502e-06,
)


def _horner(coefficients, x):
  """``sum_j c_j x^j`` for ``coefficients`` lowest degree first."""
  acc = np.float32(coefficients[-1])
  for c in coefficients[-2::-1]:
    acc = np.float32(c) + acc * x
  return acc


def log_positive(v: jax.Array, coefficients=_LOG1P_OVER_F_SQUARED) -> jax.Array:
  """``log(v)`` for positive normal float32 ``v``, without special cases.

  The exponent and mantissa are split with integer operations on the bits
  (the mantissa reduced to ``[sqrt(1/2), sqrt(2))``), then a polynomial in
  the mantissa: about half the instructions of XLA's ``log``, which also
  handles zero, negatives, infinities and NaN. On the generator's grid
  (``v = (1 - s)(1 + s)``, never below 2^-22) its error is within 9.6e-8
  relative of float64 (1.1e-7 where multiply-adds are not fused), XLA's
  ``log``'s 1.2e-7. ``coefficients``: ``P`` of ``log1p(f) = f + f^2 P(f)``,
  lowest degree first (another generator's shorter fit).
  """
  bits = jax.lax.bitcast_convert_type(v, jnp.int32)
  shifted = bits - _SQRT_HALF_BITS
  k = (shifted >> 23).astype(jnp.float32)  # arithmetic shift: floor
  m = jax.lax.bitcast_convert_type(
    (shifted & np.int32(0x007FFFFF)) + _SQRT_HALF_BITS, jnp.float32
  )
  f = m - np.float32(1.0)
  log1p = f + f * f * _horner(coefficients, f)
  return k * np.float32(np.log(2.0)) + log1p


class QuantileFit(NamedTuple):
  """The coefficients of :func:`normal_quantile_on_grid`, lowest degree
  first: ``P`` of the log's ``log1p(f) = f + f^2 P(f)`` and the rational
  ``N(w) / D(w)`` of ``sqrt(2) erfinv(s) / s`` in ``w = -log(1 - s^2)``."""

  log1p: tuple
  numerator: tuple
  denominator: tuple


QUANTILE_FIT = QuantileFit(
  _LOG1P_OVER_F_SQUARED, _QUANTILE_NUMERATOR, _QUANTILE_DENOMINATOR
)


def normal_quantile_on_grid(
  s: jax.Array, fit: QuantileFit = QUANTILE_FIT
) -> jax.Array:
  """``sqrt(2) erfinv(s)``, the standard normal quantile of ``(1 + s) / 2``,
  in float32 for ``|s| < 1``.

  As in Giles (2010), "Approximating the erfinv function", the variable is
  ``w = -log((1 - s)(1 + s))``: on the generator's grid (multiples of
  ``2^-23``) both factors are exact, so ``w`` carries one rounding and the
  log's. Giles uses two polynomials (``w < 5``, and a tail in
  ``sqrt(w)``) and selects one per element; here one rational function of
  ``w`` covers the whole grid: no square root, no select, one division,
  and :func:`log_positive` instead of XLA's ``log``, about 0.6x the time of
  that two-branch form on CPU. Over all ``2^23`` grid points the relative
  error against float64 is at most 2.6e-7 (float32 spacing is 1.2e-7
  relative). Odd in ``s`` to the bit: ``w`` is even and the result is
  ``s`` times a function of ``w``. ``fit``: this generator's coefficients
  (:data:`QUANTILE_FIT`) or another's.
  """
  w = -log_positive((1.0 - s) * (1.0 + s), fit.log1p)
  ratio = _horner(fit.numerator, w) / _horner(fit.denominator, w)
  return s * ratio


def to_gaussian(words: jax.Array, dtype) -> jax.Array:
  """Standard normal by the inverse CDF, ``sqrt(2) erfinv(s)``.

  ``s = (2m + 1 - 2^23) / 2^23`` for the top 23 bits ``m``: the odd
  multiples of ``2^-23`` in ``(-1, 1)``, exact in float32 and symmetric, so
  ``|z| <= 5.3`` and the distribution is exactly symmetric
  (:func:`normal_quantile_on_grid`).
  """
  m = (words >> 9).astype(jnp.int32)
  s = (2 * m + (1 - 2**23)).astype(jnp.float32) * np.float32(2.0**-23)
  return normal_quantile_on_grid(s).astype(dtype)
