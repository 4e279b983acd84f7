"""The second counter hash (``direction_prng='counter2'``): the first's
design at about three quarters of its instructions per element.

A draw of ``u`` by the counter hash (:mod:`zoprivacy.zo.counter_hash`, kept
as ``'counter'`` so that runs logged with it replay bit for bit) is bound by
its arithmetic on CPU: XLA fuses it into each use, and a sphere step draws
``u`` three times (its norm, the two passes, the update). This generator
keeps everything users rely on (each 32-bit word a pure function of the
key, the leaf number and the position; any slice drawn alone equals the
same slice of the whole draw; the map from position to word not a
permutation; the same inverse-CDF Gaussian on the same symmetric 23-bit
grid) and draws it with 4 integer multiplies per word instead of 8, and a
Gaussian transform 2 multiply-adds shorter. Compiled for AVX2 (jax
0.10.2), a Gaussian draw's loop takes 58 vector instructions per 8
elements against 77 (``benchmarks/step_profile.py`` times both).

Construction, per 32-bit output at position ``i`` of leaf ``l`` under key
words ``(w0, w1)``, with ``mix_a`` and ``mix_b`` the two finalizers of
:mod:`zoprivacy.zo.counter_hash` and ``rot(x) = (x << 16) | (x >> 16)``::

    k0 = mix_b(w0 ^ s0), k1 = mix_a(w1 ^ s1)     as in the first hash
    ka = mix_b(mix_a(l ^ k0) + k1)               per leaf: 32 key bits
    kb = mix_a(mix_b(l + k1) ^ k0)               per leaf: 32 more
    out = mix_a(i ^ ka) ^ mix_a(rot(i) ^ kb)

A position ``i + 2^32 h`` of 2^32 or more xors ``ka`` with ``mix_b(h (k1 |
1))`` and ``kb`` with ``mix_a(h (k0 | 1))`` (0 where ``h`` is 0).

Each lane is a keyed bijection of ``i`` (2 multiplies); the second reads
``i`` with its halves swapped, so the two lanes see different bit orders
and their xor is not a permutation (32-bit words collide as often as
independent uniform words). One lane alone is not enough: a 2-multiply
finalizer of a counter leaves a correlation between the values of an
aligned block of positions (sums over blocks of 64 consecutive Gaussians
varied 4.9 standard errors above independence over 16 keys for one such
finalizer), which the second lane removes (within 2 standard errors at
blocks of 4 to 65,536, as the first hash). The statistical tests both
generators pass are listed in ``docs/directions.md``.

The Gaussian is :func:`~zoprivacy.zo.counter_hash.normal_quantile_on_grid`
with shorter fits: the log's polynomial of degree 5 (1.3e-6 absolute error
in ``log1p``, which matters where ``w`` is large, relative to ``w``), the
same (5, 5) rational in ``w``. On all 2^23 grid points the result is within
2.9e-7 relative of float64 ``sqrt(2) erfinv(s)`` (the first hash: 2.6e-7),
so the CDF of the values drawn is within 6.4e-8 of ``Phi`` at every grid
point, the grid's own step (2^-24 = 6.0e-8); exactly odd, tails to 5.29
sigma. The grid point ``s`` is formed as ``m 2^-22 + (2^-23 - 1)`` from the
top 23 bits ``m`` (exact: the same ``s`` as the first hash, in three
instructions instead of five).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.zo import counter_hash, counter_positions
from zoprivacy.zo.counter_hash import (  # noqa: F401 (the same transforms)
  key_words,
  to_rademacher,
  to_uniform,
)

# ``log1p(f) = f + f^2 P(f)`` over ``f`` in ``[sqrt(1/2) - 1, sqrt(2) - 1]``,
# ``P`` of degree 5 fitted here to minimax error (1.3e-6 absolute in
# float64); and ``sqrt(2) erfinv(s) / s = N(w) / D(w)`` over the grid's
# ``w`` in ``[0, 15.95]``, (5, 5), refitted (1.3e-8 relative in float64).
# Lowest degree first.
QUANTILE_FIT = counter_hash.QuantileFit(
  log1p=(
    -0.5000084638595581,
    0.33319219946861267,
    -0.24919064342975616,
    0.20449137687683105,
    -0.18587584793567657,
    0.11949335783720016,
  ),
  numerator=(
    1.2533141374588013,
    0.43340638279914856,
    0.08424342423677444,
    0.010978294536471367,
    0.0009103313786908984,
    3.4434357075951993e-05,
  ),
  denominator=(
    1.0,
    0.08400923013687134,
    0.032189324498176575,
    0.0018749882001429796,
    0.00017966926679946482,
    1.2935796576130087e-06,
  ),
)


def leaf_keys(key: jax.Array, leaf) -> tuple[jax.Array, jax.Array]:
  """The two 32-bit words ``(ka, kb)`` that key leaf ``leaf``'s lanes."""
  k0, k1 = counter_hash.salted_key_words(key)
  leaf = jnp.asarray(leaf, jnp.uint32)
  ka = counter_hash._mix_b(counter_hash._mix_a(leaf ^ k0) + k1)
  kb = counter_hash._mix_a(counter_hash._mix_b(leaf + k1) ^ k0)
  return ka, kb


def bits(
  key: jax.Array,
  leaf: int | jax.Array,
  positions: jax.Array | counter_positions.Positions,
) -> jax.Array:
  """``uint32`` outputs for the element ``positions`` of leaf ``leaf``
  (as :func:`zoprivacy.zo.counter_hash.bits`, another construction; a
  high word keys ``ka`` and ``kb`` as the first hash's lanes)."""
  ka, kb = leaf_keys(key, leaf)
  if isinstance(positions, counter_positions.Positions):
    k0, k1 = counter_hash.salted_key_words(key)
    ka = ka ^ counter_positions.per_position(positions, k1, counter_hash._mix_b)
    kb = kb ^ counter_positions.per_position(positions, k0, counter_hash._mix_a)
    positions = positions.low
  i = positions.astype(jnp.uint32)
  # rot(i) ^ kb, formed as rot(i ^ rot(kb)) (rot is a bit permutation, its
  # own inverse): the same words, but no key-free function of the positions
  # for XLA to hoist out of the draws and keep in memory (a uint32 copy of
  # the first kernel's positions, 0.2x the parameters of a 1.3M MLP).
  kb_rot = (kb << 16) | (kb >> 16)
  mixed = i ^ kb_rot
  swapped = (mixed << 16) | (mixed >> 16)
  return counter_hash._mix_a(i ^ ka) ^ counter_hash._mix_a(swapped)


def leaf_bits(key: jax.Array, leaf: int, shape, *, start=0) -> jax.Array:
  """Outputs for a leaf of ``shape``, or for its slice of that shape from
  flat position ``start`` (as :func:`zoprivacy.zo.counter_hash.leaf_bits`)."""
  return bits(key, leaf, counter_positions.leaf_positions(shape, start))


def normal_quantile_on_grid(s: jax.Array) -> jax.Array:
  """``sqrt(2) erfinv(s)`` on the grid, with this generator's fits."""
  return counter_hash.normal_quantile_on_grid(s, QUANTILE_FIT)


def to_gaussian(words: jax.Array, dtype) -> jax.Array:
  """Standard normal by the inverse CDF on the symmetric 23-bit grid, as
  :func:`zoprivacy.zo.counter_hash.to_gaussian` (the same ``s`` from the
  same words; :data:`QUANTILE_FIT`)."""
  m = (words >> 9).astype(jnp.int32).astype(jnp.float32)
  s = m * np.float32(2.0**-22) + np.float32(2.0**-23 - 1.0)
  return normal_quantile_on_grid(s).astype(dtype)
