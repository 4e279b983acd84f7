"""The counter-hash direction generator: exact vectors, slicing, statistics.

Directions are public, so the generator is judged on determinism, on
regenerating any slice exactly, and on statistical quality: moments up to
the 4th, a Kolmogorov-Smirnov test, correlations across indices and keys,
bit balance, collisions of the raw 32-bit words and Marsaglia's birthday
spacings. Each statistical check uses a fixed key and a bound of about five
standard errors, so it fails for a real defect and not by chance.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from zoprivacy.zo import counter_hash, directions

KEY = jax.random.key(2024)
FROZEN_KEY0_LEAF0 = [1269609364, 1388074516, 102290031, 585485554]
FROZEN_KEY7_LEAF2 = [1571115265, 161345739, 2816853278, 2044632455]


def _np_mix_a(x):
  x = x ^ (x >> np.uint32(16))
  x = x * np.uint32(0x7FEB352D)
  x = x ^ (x >> np.uint32(15))
  x = x * np.uint32(0x846CA68B)
  return x ^ (x >> np.uint32(16))


def _np_mix_b(x):
  x = x ^ (x >> np.uint32(17))
  x = x * np.uint32(0xED5AD4BB)
  x = x ^ (x >> np.uint32(11))
  x = x * np.uint32(0xAC4C1B51)
  x = x ^ (x >> np.uint32(15))
  x = x * np.uint32(0x31848BAB)
  return x ^ (x >> np.uint32(14))


def _np_bits(k0, k1, leaf, i):
  """An independent NumPy transcription of the documented construction."""
  with np.errstate(over="ignore"):
    k0 = _np_mix_b(np.uint32(k0) ^ np.uint32(0x85EBCA6B))
    k1 = _np_mix_a(np.uint32(k1) ^ np.uint32(0xC2B2AE35))
    leaf = np.uint32(leaf)
    i = i.astype(np.uint32)
    rot = (k1 << np.uint32(16)) | (k1 >> np.uint32(16))
    a = _np_mix_a((i * np.uint32(0x9E3779B9)) ^ k0 ^ _np_mix_b(leaf + k1))
    b = _np_mix_b(a ^ k1)
    c = _np_mix_a(i ^ rot ^ _np_mix_a(leaf ^ k0))
    return b ^ c


def _words(n, key=KEY, leaf=0):
  return np.asarray(counter_hash.leaf_bits(key, leaf, (n,)))


def test_matches_the_documented_construction_and_a_test_vector():
  k0, k1 = (int(w) for w in jax.random.key_data(KEY))
  positions = np.arange(1000, dtype=np.uint32)
  for leaf in (0, 3):
    np.testing.assert_array_equal(
      _words(1000, leaf=leaf), _np_bits(k0, k1, leaf, positions)
    )
  # Frozen vectors: a change of the generator changes every replayed run.
  first = counter_hash.bits(jax.random.key(0), 0, jnp.arange(4))
  assert np.asarray(first).tolist() == FROZEN_KEY0_LEAF0
  later = counter_hash.bits(jax.random.key(7), 2, jnp.arange(4))
  assert np.asarray(later).tolist() == FROZEN_KEY7_LEAF2


def test_raw_and_typed_keys_agree_and_keys_differ():
  raw = jax.random.key_data(KEY)
  np.testing.assert_array_equal(
    np.asarray(counter_hash.leaf_bits(raw, 0, (64,))), _words(64)
  )
  other = _words(4096, key=jax.random.fold_in(KEY, 1))
  assert np.mean(other == _words(4096)) < 0.01


def test_any_slice_regenerates_exactly():
  # Every draw is jitted, as in the steps: inside one fused kernel XLA's
  # CPU compiler contracts multiply-adds into FMAs, which op-by-op
  # (eager) evaluation does not, so eager and jitted draws may differ in
  # the last place at full optimization.
  params = {"a": jnp.zeros((6, 5, 7)), "b": jnp.zeros((11,))}
  sampler = jax.jit(directions.get_sampler("gaussian", prng="counter"))
  u = sampler(KEY, params)
  leaves = jax.tree.leaves(u)
  # Layer 4 of the stacked leaf "a" (flat positions 140..174).
  layer = jax.jit(
    lambda: directions.leaf_slice(
      "gaussian", KEY, 0, (5, 7), jnp.float32, start=4 * 35
    )
  )()
  np.testing.assert_array_equal(layer, leaves[0][4])
  # A shard of leaf "b" under jit, with a traced start.
  shard = jax.jit(
    lambda s: directions.leaf_slice(
      "gaussian", KEY, 1, (3,), jnp.float32, start=s
    )
  )(5)
  np.testing.assert_array_equal(shard, leaves[1][5:8])
  # Leaf l does not depend on the other leaves.
  alone = sampler(KEY, {"a": jnp.zeros((6, 5, 7))})
  np.testing.assert_array_equal(alone["a"], leaves[0])
  with pytest.raises(ValueError, match="by slice"):
    directions.leaf_slice("sphere", KEY, 0, (3,), jnp.float32)


def test_gaussian_moments_and_ks():
  n = 1 << 21
  z = np.asarray(
    counter_hash.to_gaussian(counter_hash.leaf_bits(KEY, 0, (n,)), jnp.float32),
    np.float64,
  )
  se = 1 / math.sqrt(n)
  assert abs(z.mean()) < 5 * se
  assert abs(z.var() - 1) < 5 * math.sqrt(2) * se
  assert abs(stats.skew(z)) < 5 * math.sqrt(6) * se
  assert abs(stats.kurtosis(z, fisher=False) - 3) < 5 * math.sqrt(24) * se
  ks = stats.kstest(z, "norm")
  # D would be about 0.5/sqrt(n) for a perfect sampler; 1.95/sqrt(n) is the
  # 0.1% critical value. The 23-bit grid adds at most ~1e-7.
  assert ks.statistic < 1.95 * se
  assert np.max(np.abs(z)) < 5.4


def test_uniform_and_rademacher_are_balanced():
  words = _words(1 << 20)
  u = np.asarray(counter_hash.to_uniform(jnp.asarray(words)))
  assert 0 < u.min() and u.max() < 1
  assert stats.kstest(u, "uniform").statistic < 1.95 / math.sqrt(u.size)
  r = np.asarray(counter_hash.to_rademacher(jnp.asarray(words), jnp.float32))
  assert set(np.unique(r)) == {-1.0, 1.0}
  assert abs(r.mean()) < 5 / math.sqrt(r.size)
  # Every one of the 32 bits is set half of the time.
  ones = np.unpackbits(words.view(np.uint8)).reshape(-1, 32).mean(0)
  np.testing.assert_array_less(
    np.abs(ones - 0.5), 5 * 0.5 / math.sqrt(words.size)
  )


def test_no_correlation_across_indices_leaves_or_keys():
  n = 1 << 20
  z = np.asarray(
    counter_hash.to_gaussian(counter_hash.leaf_bits(KEY, 0, (n,)), jnp.float32),
    np.float64,
  )
  bound = 5 / math.sqrt(n)
  for lag in (1, 2, 3, 7, 64, 4096):
    assert abs(np.corrcoef(z[:-lag], z[lag:])[0, 1]) < bound
  for other in (
    counter_hash.leaf_bits(KEY, 1, (n,)),
    counter_hash.leaf_bits(jax.random.fold_in(KEY, 1), 0, (n,)),
    counter_hash.leaf_bits(jax.random.key(2025), 0, (n,)),
  ):
    w = np.asarray(counter_hash.to_gaussian(other, jnp.float32), np.float64)
    assert abs(np.corrcoef(z, w)[0, 1]) < bound


def test_raw_words_collide_like_independent_uniforms():
  # n words from 2^32 values: about n^2 / 2^33 colliding pairs (Poisson).
  # A permutation of the counter (one bijective hash) would give none.
  n = 1 << 20
  words = _words(n)
  expected = n * (n - 1) / 2 / 2.0**32
  collisions = n - np.unique(words).size
  assert abs(collisions - expected) < 5 * math.sqrt(expected)


def test_birthday_spacings():
  # Marsaglia's test: m = 2^12 birthdays in a year of 2^32 days; the number
  # of repeated spacings is Poisson with lambda = m^3 / (4 * 2^32) = 4.
  m, blocks = 1 << 12, 256
  words = _words(m * blocks).reshape(blocks, m).astype(np.int64)
  spacings = np.diff(np.sort(words, axis=1), axis=1)
  spacings = np.sort(spacings, axis=1)
  repeats = np.sum(spacings[:, 1:] == spacings[:, :-1], axis=1)
  assert abs(repeats.mean() - 4.0) < 5 * 2.0 / math.sqrt(blocks)
  observed = np.bincount(np.minimum(repeats, 9), minlength=10)
  probs = stats.poisson.pmf(np.arange(9), 4.0)
  probs = np.append(probs, 1 - probs.sum())
  assert stats.chisquare(observed, blocks * probs).pvalue > 1e-3


def test_log_on_the_whole_grid_against_float64():
  m = np.arange(1 << 23, dtype=np.int64)
  s = ((2 * m + 1 - (1 << 23)) * 2.0**-23).astype(np.float32)
  v = (np.float32(1) - s) * (np.float32(1) + s)
  got = np.asarray(jax.jit(counter_hash.log_positive)(v), np.float64)
  want = np.log(v.astype(np.float64))
  # 9.6e-8 relative at most (1.2 units in the last place) with fused
  # multiply-adds, 1.09e-7 without (the suite's XLA level 0); log 1 = 0.
  np.testing.assert_allclose(got, want, rtol=1.15e-7, atol=0)
  # And away from the grid: every binade of the normal float32 range.
  v = np.float32(2.0) ** np.arange(-126, 128, dtype=np.float32)
  v = np.concatenate([v, v * np.float32(1.4142), v * np.float32(1.9999)])
  v = v[np.isfinite(v)]
  got = np.asarray(jax.jit(counter_hash.log_positive)(v), np.float64)
  np.testing.assert_allclose(got, np.log(v.astype(np.float64)), rtol=2e-7)


def test_too_large_leaf_is_refused():
  with pytest.raises(ValueError, match="2\\^32"):
    counter_hash.leaf_bits(KEY, 0, (1 << 16, 1 << 16))


def test_normal_quantile_on_the_whole_grid_against_float64():
  from scipy import special

  m = np.arange(1 << 23, dtype=np.int64)
  s = ((2 * m + 1 - (1 << 23)) * 2.0**-23).astype(np.float32)
  got = np.asarray(jax.jit(counter_hash.normal_quantile_on_grid)(s), np.float64)
  want = np.sqrt(2.0) * special.erfinv(s.astype(np.float64))
  # Every grid point, tails included (|s| up to 1 - 2^-23): at most
  # 2.6e-7 relative; float32 spacing is 1.2e-7 relative.
  np.testing.assert_allclose(got, want, rtol=3e-7, atol=0)
  # Odd to the bit, so the Gaussian is exactly symmetric.
  np.testing.assert_array_equal(got[::-1], -got)
  # Test vector: the Gaussian of the frozen words of key 0, against
  # sqrt(2) erfinv((2 (w >> 9) + 1 - 2^23) / 2^23) in float64.
  z = counter_hash.to_gaussian(
    jnp.asarray(FROZEN_KEY0_LEAF0, jnp.uint32), jnp.float32
  )
  np.testing.assert_allclose(
    z, [-0.537086505, -0.458807128, -1.980631845, -1.097007844], rtol=3e-7
  )
