"""Leaves of 2^32 elements or more: the counter hashes number their
positions with two 32-bit words, keep every word below 2^32, and give the
same ``u`` at a position on every path (whole leaf, row by row, layer by
layer, a slice at a traced 64-bit offset, positions given one by one).

Nothing here allocates 2^32 elements: positions beyond 2^32 are reached by
the offsets of small slices, and the whole-leaf numbering of a large leaf
is exercised on small shapes with a small row limit (``limit``), the same
code that numbers a stacked leaf of 2^32 or more elements by rows."""

import math

import counter_reference
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from simulated_devices import run_check

from zoprivacy.models import layer_perturbation
from zoprivacy.zo import (
  counter_hash,
  counter_hash2,
  counter_positions,
  directions,
)

KEY = jax.random.key(2024)
WORDS = tuple(int(w) for w in jax.random.key_data(KEY))
HASHES = {"counter": counter_hash, "counter2": counter_hash2}
REFERENCE = {
  "counter": counter_reference.bits,
  "counter2": counter_reference.bits2,
}
each_prng = pytest.mark.parametrize("prng", HASHES)
TOP = 2**32


def _reference(prng, leaf, start, size):
  """The construction's words at ``start .. start + size - 1``."""
  positions = np.uint64(start) + np.arange(size, dtype=np.uint64)
  return REFERENCE[prng](*WORDS, leaf, positions)


def test_products_and_sums_of_two_words_are_exact():
  rng = np.random.default_rng(0)
  edges = [0, 1, 2**16 - 1, 2**16, 2**31, TOP - 1]
  index = np.array(edges + list(rng.integers(0, TOP, 58)), np.uint64)
  width = edges[1:] + [int(w) for w in rng.integers(1, TOP, 8)]
  for w in width:
    got = jax.jit(lambda i, w=w: counter_positions.product(i, w))(
      index.astype(np.uint32)
    )
    value = np.asarray(got.high, np.uint64) << np.uint64(32)
    value = value | np.asarray(got.low, np.uint64)
    want = [int(i) * w for i in index]
    assert [int(v) for v in value] == want
  start = counter_positions.as_offset(5 * TOP + TOP - 3)
  total = counter_positions.add(start, counter_positions.as_offset(7))
  assert (int(total.high), int(total.low)) == (6, 4)
  with pytest.raises(ValueError, match="negative"):
    counter_positions.as_offset(-1)


@each_prng
def test_words_below_2_32_are_unchanged_on_the_two_word_path(prng):
  hash_ = HASHES[prng]
  # The last 100 positions below 2^32 and an inner block, by both numberings.
  for start in (TOP - 100, 12345):
    plain = jax.jit(lambda s=start: hash_.leaf_bits(KEY, 3, (4, 25), start=s))()
    offset = counter_positions.Offset(start, 0)
    wide = jax.jit(lambda o=offset: hash_.leaf_bits(KEY, 3, (4, 25), start=o))()
    np.testing.assert_array_equal(plain, wide)
    np.testing.assert_array_equal(
      plain, _reference(prng, 3, start, 100).reshape(4, 25)
    )


@each_prng
@pytest.mark.parametrize(
  "start", [TOP - 37, TOP, 3 * TOP + 11, (TOP - 1) * TOP + TOP - 50]
)
def test_positions_beyond_2_32_match_the_construction(prng, start):
  # A slice of 100 elements from a Python start, across or beyond 2^32.
  got = jax.jit(lambda: HASHES[prng].leaf_bits(KEY, 2, (100,), start=start))()
  np.testing.assert_array_equal(got, _reference(prng, 2, start, 100))
  # The same slice from a traced two-word offset, as a layer's start.
  offset = counter_positions.as_offset(start)
  traced = jax.jit(
    lambda lo, hi: HASHES[prng].leaf_bits(
      KEY, 2, (100,), start=counter_positions.Offset(lo, hi)
    )
  )(offset.low, offset.high)
  np.testing.assert_array_equal(traced, got)


@each_prng
@pytest.mark.parametrize(
  "shape,start",
  [((5, 6, 7), TOP - 100), ((2, 3, 5, 7), 2 * TOP - 50), ((3, 70), TOP - 90)],
)
def test_a_leaf_numbered_by_rows_equals_its_flat_numbering(prng, shape, start):
  # limit=64: rows of fewer than 64 elements over the leading axes, as a
  # leaf of 2^32 or more is numbered by rows of fewer than 2^32; (3, 70)
  # has more rows than the limit (numbered flat, by rows of 32, and
  # reshaped), as a leaf with an axis of 2^32 elements.
  positions = counter_positions.leaf_positions(shape, start, limit=64)
  assert isinstance(positions, counter_positions.Positions)
  got = jax.jit(
    lambda: HASHES[prng].bits(
      KEY, 1, counter_positions.leaf_positions(shape, start, limit=64)
    )
  )()
  size = math.prod(shape)
  want = _reference(prng, 1, start, size).reshape(shape)
  np.testing.assert_array_equal(got, want)


@each_prng
def test_a_layer_of_a_stack_beyond_2_32_is_its_slice_of_the_leaf(prng):
  # A stack of L layers of 4 x 8 with L * 32 > 2^32: layer l starts at
  # l * 32 (computed in two words from the traced layer index).
  num_layers, layer = 2**27 + 5, 2**27 + 3
  perturbation = layer_perturbation.Perturbation(
    "gaussian", KEY, jnp.float32(1.0), prng
  )
  zeros = {"w": jnp.zeros((4, 8))}
  apply = jax.jit(
    lambda i: perturbation.apply_layer(zeros, {"w": 0}, i, num_layers)
  )
  u = apply(layer)["w"]
  start = layer * 32
  assert start > TOP
  sliced = jax.jit(
    lambda: directions.leaf_slice(
      "gaussian", KEY, 0, (4, 8), jnp.float32, start=start, prng=prng
    )
  )()
  np.testing.assert_array_equal(u, sliced)
  words = _reference(prng, 0, start, 32).reshape(4, 8)
  gaussian = jax.jit(lambda w: HASHES[prng].to_gaussian(w, jnp.float32))
  np.testing.assert_array_equal(u, gaussian(words))
  # Below 2^32 a stack's layers are numbered by 32-bit positions, as before.
  below = jax.jit(lambda i: perturbation.apply_layer(zeros, {"w": 0}, i, 1000))(
    7
  )["w"]
  first = _reference(prng, 0, 7 * 32, 32).reshape(4, 8)
  np.testing.assert_array_equal(below, gaussian(first))


@each_prng
def test_blocks_beyond_2_32_are_fresh_draws(prng):
  # Words at j and at j + h 2^32 (h = 1..3) agree no more often than
  # independent words, and each block's Gaussians have mean 0, variance 1.
  n = 1 << 16
  draw = jax.jit(
    lambda h: directions.leaf_slice(
      "gaussian", KEY, 0, (n,), jnp.float32,
      start=counter_positions.Offset(jnp.uint32(0), h), prng=prng,
    )
  )  # fmt: skip
  blocks = [np.asarray(draw(jnp.uint32(h)), np.float64) for h in range(4)]
  for h in range(1, 4):
    assert abs(blocks[h].mean()) < 5 / math.sqrt(n)
    assert abs(blocks[h].var() - 1) < 5 * math.sqrt(2 / n)
    corr = np.corrcoef(blocks[0], blocks[h])[0, 1]
    assert abs(corr) < 5 / math.sqrt(n)
    assert np.mean(blocks[0] == blocks[h]) < 1e-3


def test_a_stack_of_opt_66b_layers_is_numbered_not_refused():
  # OPT-66B's stacked FFN kernel: 64 x 9216 x 36864 = 2.2e10 elements.
  shape = (64, 9216, 36864)
  leaf = jax.ShapeDtypeStruct(shape, jnp.bfloat16)
  assert layer_perturbation.leaf_numbers({"fc1": leaf}) == {"fc1": 0}
  whole = jax.eval_shape(
    lambda: directions.leaf_slice(
      "gaussian", KEY, 0, shape, jnp.float32, prng="counter2"
    )
  )
  assert whole.shape == shape


def test_sharded_draws_beyond_2_32_equal_the_construction():
  # 8 simulated devices, each drawing its shard of the positions.
  result = run_check("wide_positions_check.py", timeout=300)
  assert len(result) == 4, result
  for case in result.values():
    assert case["equal"] and case["shards"] == 8, result
