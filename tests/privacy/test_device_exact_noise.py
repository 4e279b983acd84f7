"""The device sampler of exact discrete Gaussian noise: its parts, its law
against the exact pmf and against the host sampler, its determinism.

Statistical tests use fixed (insecure, test-only) keys, so they are
deterministic; the stated false-failure rate is the one a fresh key would
have.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from zoprivacy.secret_noise import (
  compaction,
  device_tables,
  multiword,
  threefry,
)
from zoprivacy.secret_noise import device_discrete_gaussian as ddg
from zoprivacy.secret_noise import vector_discrete_noise as vdn

KEY = jnp.array([11, 22, 33, 44], jnp.uint32)
ALPHA = 1e-6  # false-failure rate of each statistical test at a fresh key
SIGMAS = [1, 2, 3, 7, 64, 127, 128, 300, 65537]


def _draw(sigma, size, key=KEY, step=0):
  fn = jax.jit(lambda k, s: ddg.draw(k, s, sigma, size))
  return np.asarray(fn(key, jnp.int32(step)))


def test_threefry_matches_the_random123_known_answers():
  """Random123's kat_vectors for threefry4x32, 20 rounds."""
  cases = [
    ("0 0 0 0", "0 0 0 0", "9c6ca96a e17eae66 fc10ecd4 5256a7d8"),
    ("f" * 8 + " ffffffff" * 3, "f" * 8 + " ffffffff" * 3,
     "2a881696 57012287 f6c7446e a16a6732"),
    ("243f6a88 85a308d3 13198a2e 03707344",
     "a4093822 299f31d0 082efa98 ec4e6c89",
     "59cd1dbb b8879579 86b5d00c ac8b6d84"),
  ]  # fmt: skip
  for ctr, key, want in cases:
    words = lambda s: [jnp.uint32(int(v, 16)) for v in s.split()]
    got = threefry.threefry4x32(words(key), words(ctr))
    assert " ".join(f"{int(v):08x}" for v in got) == want


def test_multiword_products_bound_the_exact_product():
  rng = np.random.default_rng(0)
  one = 1 << multiword.BITS
  ints = [
    int(rng.integers(0, 2**62)) << 98 | int(rng.integers(0, 2**62))
    for _ in range(64)
  ]
  ints += [one - 1, one - 2, 1, 0, one >> 1]
  a = np.stack([multiword.from_int(v) for v in ints])
  b = a[::-1]
  lo = np.asarray(multiword.mul_lower(jnp.asarray(a), jnp.asarray(b)))
  hi, sat = multiword.mul_upper(jnp.asarray(a), jnp.asarray(b))
  for x, y, l, h, s in zip(
    ints, ints[::-1], lo, np.asarray(hi), np.asarray(sat)
  ):
    exact = x * y  # in units of 2^-320
    assert multiword.to_int(l) << multiword.BITS <= exact
    assert exact - (multiword.to_int(l) << multiword.BITS) < one << 1
    assert s or multiword.to_int(h) << multiword.BITS >= exact
  less = np.asarray(multiword.less(jnp.asarray(a), jnp.asarray(b)))
  assert list(less) == [x < y for x, y in zip(ints, ints[::-1])]


@pytest.mark.parametrize(
  "n,size,density",
  [
    (1, 4, 1.0),
    (5000, 64, 0.003),
    (70_001, 900, 0.01),
    (70_001, 50, 0.01),
    (3000, 10, 0.0),
  ],
)
def test_first_true_matches_numpy(n, size, density):
  flags = np.random.default_rng(n).random(n) < density
  index, count = jax.jit(compaction.first_true, static_argnums=1)(
    jnp.asarray(flags), size
  )
  assert int(count) == flags.sum()
  np.testing.assert_array_equal(
    index, compaction.as_numpy_reference(flags, size)
  )


@pytest.mark.parametrize("sigma", [1, 5, 128, 1000, 2**24])
def test_alias_table_gives_exactly_its_integer_weights(sigma):
  """Every slot's symbol and alias mass, summed, gives the weights the
  table was built from; each rho is at most 1 and its bounds bracket the
  float32 value."""
  tab = device_tables.tables(sigma)
  unit = 1 << device_tables.THRESHOLD_BITS
  thr, alias = tab.packed & 1023, tab.packed >> 10
  mass = np.zeros(len(thr), np.int64)
  np.add.at(mass, np.arange(len(thr)), thr)
  np.add.at(mass, alias, unit - thr)
  assert mass.sum() == len(thr) * unit
  assert np.all(mass[: tab.buckets] >= 1)
  lo = np.array([multiword.to_int(r) for r in tab.rho_lower]) / 2.0**160
  hi = np.array([multiword.to_int(r) for r in tab.rho_upper]) / 2.0**160
  rho = tab.rho.astype(np.float64) / device_tables.RHO_SCALE
  assert np.all(lo <= rho * (1 + 1e-6)) and np.all(
    rho <= hi * (1 + 1e-6) + 1e-40
  )
  assert hi.max() <= 1.0 and np.isclose(hi.max(), 1.0)


def _crafted_words(tab, rng, count):
  """Candidates with random fields and their uniform's 24 bits placed at
  the float test's thresholds (exactly at, and 1-3 units around, the
  float value of alpha) and at random."""
  w = 1 << tab.width_bits
  slot = rng.integers(0, 2048, count)
  t = rng.integers(0, 512, count)
  neg = rng.integers(0, 2, count)
  u = rng.integers(0, w, count)
  a = slot | t << 11 | neg << 20 | (u & 2047) << 21
  b_hi = (u >> 11) << 24
  words = dict(
    a=jnp.asarray(a.astype(np.uint32)), b=jnp.asarray(b_hi.astype(np.uint32))
  )
  return words, u


@pytest.mark.parametrize("sigma", [3, 200, 65537, 2**24])
def test_float_decisions_agree_with_the_certified_bounds(sigma):
  """Where the float test decides, the 160-bit bounds of alpha agree:
  accepted means ``(W + 1) 2^-24 <= L``, rejected ``W 2^-24 >= H``; ``W``
  is put at and around both thresholds of every candidate (``alpha (1 +-
  2^-18)``), the worst case, and at ``alpha`` itself."""
  tab = device_tables.tables(sigma)
  words, u = _crafted_words(tab, np.random.default_rng(sigma), 2048)
  a, b_hi = words["a"], words["b"]
  slot, t, negative, *_ = ddg._fields(tab, a, b_hi)  # pylint: disable=protected-access
  j = jnp.minimum(ddg._bucket(tab, slot, t), tab.buckets)  # pylint: disable=protected-access
  bounds = jax.jit(lambda j, u: ddg.exact_bounds(tab, j, u))
  lo, hi, sat = bounds(j, jnp.asarray(u, jnp.int32))
  lo = [multiword.to_int(x) for x in np.asarray(lo)]
  hi = [multiword.to_int(x) for x in np.asarray(hi)]
  scale = 1 << (multiword.BITS - 24)
  base = np.array([x // scale for x in lo], np.int64)
  zero = (np.asarray(j) * (1 << tab.width_bits) + u == 0) & np.asarray(negative)
  structural = (np.asarray(j) >= tab.buckets) | (zero & (tab.width_bits > 0))
  accepted = rejected = 0
  for side in (-1, 0, 1):
    for delta in range(-3, 4):
      w24 = np.clip(base + side * (base >> 18) + delta, 0, 2**24 - 1)
      b = b_hi | jnp.asarray(w24.astype(np.uint32))
      state = np.asarray(ddg._decode(tab, a, b)) & 3  # pylint: disable=protected-access
      for k in np.flatnonzero(~structural):
        if state[k] == 0:
          assert (int(w24[k]) + 1) * scale <= lo[k]
          accepted += 1
        elif state[k] == 1:
          assert not sat[k] and int(w24[k]) * scale >= hi[k]
          rejected += 1
  assert accepted > 2_000 and rejected > 500, (accepted, rejected)


def _pmf_bins(sigma, bins=60):
  """Integer cut points of about equal target mass and the target's mass
  in each cell (float64, exact enough for the test)."""
  bound = int(14 * sigma) + 2
  support = np.arange(-bound, bound + 1)
  pmf = np.exp(-0.5 * (support / sigma) ** 2)
  pmf /= pmf.sum()
  cdf = np.cumsum(pmf)
  cuts = np.unique(np.searchsorted(cdf, np.linspace(0, 1, bins + 1)[1:-1]))
  edges = support[cuts]
  mass = np.add.reduceat(pmf, np.concatenate([[0], cuts + 1]))
  return edges, mass


def _cells(x, edges):
  return np.bincount(
    np.searchsorted(edges, x, side="left"), minlength=len(edges) + 1
  )


@pytest.mark.parametrize("sigma", SIGMAS)
def test_device_draws_match_the_discrete_gaussian_pmf(sigma):
  """200,000 draws against the exact pmf: chi-square p > 1e-6 over about
  60 equal-mass integer cells (false-failure rate 1e-6 per sigma)."""
  x = _draw(sigma, 200_000)
  edges, mass = _pmf_bins(sigma)
  counts = _cells(x, edges)
  assert stats.chisquare(counts, mass * len(x)).pvalue > ALPHA


def test_the_chi_square_test_can_fail():
  """The same test rejects sigma 3.1 drawn for sigma 3 (and 2% off at
  sigma 1000)."""
  x = np.round(_draw(31, 200_000) / 10.0).astype(np.int64)
  edges, mass = _pmf_bins(3)
  assert stats.chisquare(_cells(x, edges), mass * len(x)).pvalue < ALPHA
  x = _draw(1020, 200_000)
  edges, mass = _pmf_bins(1000)
  assert stats.chisquare(_cells(x, edges), mass * len(x)).pvalue < ALPHA


@pytest.mark.parametrize("sigma", [3, 1000])
def test_device_and_host_samplers_have_the_same_law(sigma):
  """Two-sample chi-square test of homogeneity, 200,000 draws each, on the
  equal-mass cells: p > 1e-6 (false-failure rate 1e-6 per sigma)."""
  device = _draw(sigma, 200_000)
  host = vdn.discrete_gaussian(
    vdn.words_for_keys(np.asarray(KEY), sigma), sigma, 200_000
  )
  edges, _ = _pmf_bins(sigma)
  table = np.stack([_cells(device, edges), _cells(host, edges)])
  assert stats.chi2_contingency(table).pvalue > ALPHA


def test_the_exact_test_carries_the_law(monkeypatch):
  """With the float test's window widened to 2^-3 (about a quarter of the
  candidates left to the 160-bit exact test), the draws still follow the
  pmf: the exact test decides correctly, not only rarely."""
  monkeypatch.setattr(device_tables, "WINDOW", 2.0**-3)
  monkeypatch.setattr(ddg, "_DOWN", 1.0 - 2.0**-3)
  monkeypatch.setattr(ddg, "_UP", 1.0 + 2.0**-3)
  device_tables.pool_sizes.cache_clear()
  try:
    x = _draw(1000, 200_000, step=3)
  finally:
    device_tables.pool_sizes.cache_clear()
  edges, mass = _pmf_bins(1000)
  assert stats.chisquare(_cells(x, edges), mass * len(x)).pvalue > ALPHA


def test_draws_are_a_pure_function_of_key_step_sigma_and_size():
  """The same key and step give the same draws, bit for bit, in two calls,
  jitted or not and under vmap; another step or key gives others."""
  draw = jax.jit(lambda k, s: ddg.draw(k, s, 1000, 5000))  # one compilation
  at = lambda key, step: np.asarray(draw(key, jnp.int32(step)))
  a = at(KEY, 7)
  assert np.array_equal(a, at(KEY, 7))
  assert np.array_equal(a, np.asarray(ddg.draw(KEY, 7, 1000, 5000)))
  assert not np.array_equal(a, at(KEY, 8))
  other = at(KEY + 1, 7)
  assert not np.array_equal(a, other)
  keys = jnp.stack([KEY, KEY + 1])
  rows = jax.jit(jax.vmap(lambda k: ddg.draw(k, 7, 1000, 5000)))(keys)
  assert np.array_equal(np.asarray(rows[0]), a)
  assert np.array_equal(np.asarray(rows[1]), other)


def test_failure_bound_holds_at_every_size():
  for sigma in (1, 1000, 2**24):
    for size in (1, 10, 10**4, 10**6, 4_180_000, 2**30):
      pools = device_tables.pool_sizes(sigma, size)
      assert pools.failure <= device_tables.DRAW_FAILURE
      assert pools.spares >= pools.rejected >= 1 or size < 2
  with pytest.raises(ValueError):
    device_tables.pool_sizes(1000, 2**31)
  assert math.isclose(device_tables.DRAW_FAILURE, 2.0**-112)
