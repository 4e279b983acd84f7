"""The counter-hash direction generators: exact vectors, slicing, statistics.

Directions are public, so a generator is judged on determinism, on
regenerating any slice exactly, and on statistical quality: moments up to
the 4th, a Kolmogorov-Smirnov test, correlations across indices and keys,
sums over aligned blocks, bit balance, collisions of the raw 32-bit words
and Marsaglia's birthday spacings. Each statistical check uses fixed keys
and a bound of about five standard errors, so it fails for a real defect
and not by chance. Both counter hashes ('counter', the first, and
'counter2', the default's) pass every check.
"""

import math

import counter_reference
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from zoprivacy.zo import counter_hash, counter_hash2, directions

KEY = jax.random.key(2024)
FROZEN_KEY0_LEAF0 = [1269609364, 1388074516, 102290031, 585485554]
FROZEN_KEY7_LEAF2 = [1571115265, 161345739, 2816853278, 2044632455]
# The second hash's words at the same places.
FROZEN2_KEY0_LEAF0 = [2320675478, 333401932, 1455641035, 179446603]
FROZEN2_KEY7_LEAF2 = [4274795458, 3706752741, 2639080731, 745581543]
HASHES = {"counter": counter_hash, "counter2": counter_hash2}
each_hash = pytest.mark.parametrize("hash_", HASHES.values(), ids=HASHES)


def _words(n, key=KEY, leaf=0, hash_=counter_hash):
  return np.asarray(hash_.leaf_bits(key, leaf, (n,)))


def _gaussian(n, key=KEY, leaf=0, hash_=counter_hash):
  """``n`` Gaussian draws, jitted as every step draws them."""
  draw = jax.jit(
    lambda k: hash_.to_gaussian(hash_.leaf_bits(k, leaf, (n,)), jnp.float32)
  )
  return np.asarray(draw(key), np.float64)


def test_matches_the_documented_construction_and_a_test_vector():
  k0, k1 = (int(w) for w in jax.random.key_data(KEY))
  positions = np.arange(1000, dtype=np.uint32)
  for leaf in (0, 3):
    np.testing.assert_array_equal(
      _words(1000, leaf=leaf), counter_reference.bits(k0, k1, leaf, positions)
    )
  # Frozen vectors: a change of the generator changes every replayed run.
  first = counter_hash.bits(jax.random.key(0), 0, jnp.arange(4))
  assert np.asarray(first).tolist() == FROZEN_KEY0_LEAF0
  later = counter_hash.bits(jax.random.key(7), 2, jnp.arange(4))
  assert np.asarray(later).tolist() == FROZEN_KEY7_LEAF2


def test_second_hash_matches_its_construction_and_test_vectors():
  k0, k1 = (int(w) for w in jax.random.key_data(KEY))
  positions = np.arange(1000, dtype=np.uint32)
  for leaf in (0, 3):
    np.testing.assert_array_equal(
      _words(1000, leaf=leaf, hash_=counter_hash2),
      counter_reference.bits2(k0, k1, leaf, positions),
    )
  # Large positions too (the swapped halves of i).
  far = np.arange(2**31, 2**31 + 64, dtype=np.uint32)
  np.testing.assert_array_equal(
    np.asarray(counter_hash2.bits(KEY, 5, jnp.asarray(far))),
    counter_reference.bits2(k0, k1, 5, far),
  )
  first = counter_hash2.bits(jax.random.key(0), 0, jnp.arange(4))
  assert np.asarray(first).tolist() == FROZEN2_KEY0_LEAF0
  later = counter_hash2.bits(jax.random.key(7), 2, jnp.arange(4))
  assert np.asarray(later).tolist() == FROZEN2_KEY7_LEAF2
  # Not the first hash's words.
  assert FROZEN2_KEY0_LEAF0 != FROZEN_KEY0_LEAF0


@each_hash
def test_raw_and_typed_keys_agree_and_keys_differ(hash_):
  raw = jax.random.key_data(KEY)
  np.testing.assert_array_equal(
    np.asarray(hash_.leaf_bits(raw, 0, (64,))), _words(64, hash_=hash_)
  )
  other = _words(4096, key=jax.random.fold_in(KEY, 1), hash_=hash_)
  assert np.mean(other == _words(4096, hash_=hash_)) < 0.01


@pytest.mark.parametrize("prng", directions.COUNTER_PRNGS)
def test_any_slice_regenerates_exactly(prng):
  # Every draw is jitted, as in the steps: inside one fused kernel XLA's
  # CPU compiler contracts multiply-adds into FMAs, which op-by-op
  # (eager) evaluation does not, so eager and jitted draws may differ in
  # the last place at full optimization.
  params = {"a": jnp.zeros((6, 5, 7)), "b": jnp.zeros((11,))}
  sampler = jax.jit(directions.get_sampler("gaussian", prng=prng))
  u = sampler(KEY, params)
  leaves = jax.tree.leaves(u)
  # Layer 4 of the stacked leaf "a" (flat positions 140..174).
  layer = jax.jit(
    lambda: directions.leaf_slice(
      "gaussian", KEY, 0, (5, 7), jnp.float32, start=4 * 35, prng=prng
    )
  )()
  np.testing.assert_array_equal(layer, leaves[0][4])
  # A shard of leaf "b" under jit, with a traced start.
  shard = jax.jit(
    lambda s: directions.leaf_slice(
      "gaussian", KEY, 1, (3,), jnp.float32, start=s, prng=prng
    )
  )(5)
  np.testing.assert_array_equal(shard, leaves[1][5:8])
  # Leaf l does not depend on the other leaves.
  alone = sampler(KEY, {"a": jnp.zeros((6, 5, 7))})
  np.testing.assert_array_equal(alone["a"], leaves[0])
  # A block of rows at a traced start, as the blockwise product draws it.
  rows = jax.jit(
    lambda s: directions.leaf_slice(
      "gaussian", KEY, 0, (2, 35), jnp.float32, start=s * 35, prng=prng
    )
  )(3)
  np.testing.assert_array_equal(rows, leaves[0][3:5].reshape(2, 35))
  with pytest.raises(ValueError, match="by slice"):
    directions.leaf_slice("sphere", KEY, 0, (3,), jnp.float32, prng=prng)
  with pytest.raises(ValueError, match="counter hash"):
    directions.leaf_slice("gaussian", KEY, 0, (3,), jnp.float32, prng="rbg")


@each_hash
def test_gaussian_moments_and_ks(hash_):
  n = 1 << 21
  z = _gaussian(n, hash_=hash_)
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


@each_hash
def test_uniform_and_rademacher_are_balanced(hash_):
  words = _words(1 << 20, hash_=hash_)
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


@each_hash
def test_no_correlation_across_indices_leaves_or_keys(hash_):
  n = 1 << 20
  z = _gaussian(n, hash_=hash_)
  bound = 5 / math.sqrt(n)
  for lag in (1, 2, 3, 7, 64, 4096):
    assert abs(np.corrcoef(z[:-lag], z[lag:])[0, 1]) < bound
  key_data = np.asarray(jax.random.key_data(KEY))
  for key, leaf in (
    (KEY, 1),
    (jax.random.fold_in(KEY, 1), 0),
    (jax.random.key(2025), 0),
    # Keys one bit apart, in either word.
    (jax.random.wrap_key_data(key_data ^ np.uint32([1, 0])), 0),
    (jax.random.wrap_key_data(key_data ^ np.uint32([0, 1 << 31])), 0),
  ):
    w = _gaussian(n, key, leaf, hash_)
    assert abs(np.corrcoef(z, w)[0, 1]) < bound


@each_hash
def test_sums_over_aligned_blocks_vary_as_independent_draws(hash_):
  # A 2-multiply finalizer of a counter leaves a correlation between the
  # values of an aligned block of positions (the second hash's one-lane
  # precursor: sums over blocks of 64 varied 4.9 standard errors above
  # independence over 16 keys). Over 8 keys, the variance of each block
  # sum (scaled to 1 for independent draws) is within 5 standard errors.
  n, keys = 1 << 20, 8
  draws = [
    _gaussian(n, jax.random.key(100 + k), k % 3, hash_) for k in range(keys)
  ]
  for block in (4, 64, 1024, 16384):
    sums = np.concatenate([z.reshape(-1, block).sum(1) for z in draws])
    variance = np.mean(sums**2) / block
    assert abs(variance - 1) < 5 * math.sqrt(2 / sums.size), block


@each_hash
def test_raw_words_collide_like_independent_uniforms(hash_):
  # n words from 2^32 values: about n^2 / 2^33 colliding pairs (Poisson).
  # A permutation of the counter (one bijective hash) would give none.
  n = 1 << 20
  words = _words(n, hash_=hash_)
  expected = n * (n - 1) / 2 / 2.0**32
  collisions = n - np.unique(words).size
  assert abs(collisions - expected) < 5 * math.sqrt(expected)


@each_hash
def test_birthday_spacings(hash_):
  # Marsaglia's test: m = 2^12 birthdays in a year of 2^32 days; the number
  # of repeated spacings is Poisson with lambda = m^3 / (4 * 2^32) = 4.
  m, blocks = 1 << 12, 256
  words = _words(m * blocks, hash_=hash_).reshape(blocks, m).astype(np.int64)
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


@each_hash
def test_the_gaussian_of_every_grid_point_against_phi(hash_):
  from scipy import special

  # Every one of the 2^23 values a draw can take, from its words.
  m = np.arange(1 << 23, dtype=np.uint32)
  draw = jax.jit(lambda w: hash_.to_gaussian(w, jnp.float32))
  z = np.asarray(draw(jnp.asarray(m << np.uint32(9))), np.float64)
  exact = np.sqrt(2.0) * special.erfinv((2.0 * m + 1 - 2**23) / 2**23)
  # Relative error at most 2.6e-7 (first hash) and 2.9e-7 (second).
  np.testing.assert_allclose(z, exact, rtol=3e-7, atol=0)
  # Each value's CDF within 6.4e-8 of its grid point's, 2^-24 = 6.0e-8
  # being the grid's own half step.
  assert np.max(np.abs(special.ndtr(z) - special.ndtr(exact))) < 6.5e-8
  # Increasing and odd to the bit: the draw is exactly symmetric.
  assert np.all(np.diff(z) > 0)
  np.testing.assert_array_equal(z[::-1], -z)
  # The law of a draw (uniform on these values) against Phi: the
  # Kolmogorov distance is within 1.25e-7 (5.96e-8 for the exact grid).
  cdf, k = special.ndtr(z), np.arange(z.size)
  distance = max(
    np.max(np.abs(cdf - k / z.size)), np.max(np.abs(cdf - (k + 1) / z.size))
  )
  assert distance < 1.25e-7
  # Moments of that law: the 23-bit grid stops at 5.29 sigma.
  assert abs(np.mean(z**2) - 1) < 3e-7
  assert abs(np.mean(z**4) - 3) < 1.2e-5
  assert np.max(z) == pytest.approx(5.2947, abs=1e-4)


@pytest.mark.parametrize(
  "hash_, words, want",
  [
    (
      counter_hash,
      FROZEN_KEY0_LEAF0,
      [-0.537086505, -0.458807128, -1.980631845, -1.097007844],
    ),
    (
      counter_hash2,
      FROZEN2_KEY0_LEAF0,
      [0.101250990, -1.421221633, -0.415418476, -1.730386181],
    ),
  ],
  ids=HASHES,
)
def test_gaussian_test_vectors(hash_, words, want):
  # The Gaussian of the frozen words of key 0, against sqrt(2) erfinv((2
  # (w >> 9) + 1 - 2^23) / 2^23) in float64.
  words = jnp.asarray(words, jnp.uint32)
  z = jax.jit(lambda w: hash_.to_gaussian(w, jnp.float32))(words)
  np.testing.assert_allclose(z, want, rtol=3e-7)
