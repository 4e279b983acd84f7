"""Logical batches in physical chunks (``physical_batch_size``): one release
per batch, the same release as the whole batch at once.

Exact noise puts each example's clipped value on an integer lattice and
sums integers, so over chunks the release is the unchunked one bit for bit
whenever the per-example values are: the loss here is elementwise with
dyadic data, so that a chunk's forward pass computes the same floats as
the whole batch's (a model whose sums XLA orders differently per shape
moves a value by a rounding, and its quantized value at most one grid
step). The padding rows are adversarial (NaN, 1e30) and the batch is not a
multiple of the chunk (the last chunk is filled with masked copies of the
first row, here a padding row)."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoprivacy
from zoprivacy.core import physical_batches
from zoprivacy.estimators import base
from zoprivacy.first_order import ghost_clipping
from zoprivacy.privacy import InsecureTestNoiseWarning
from zoprivacy.secret_noise import rounded_sum_mechanism as rsm

pytestmark = pytest.mark.filterwarnings(
  "ignore", category=InsecureTestNoiseWarning
)

D = 4
X0 = {"w": jnp.array([0.5, -0.25, 1.0, 0.75])}
# 11 rows: 8 real (dyadic), row 0 and two more padding rows adversarial.
REAL = jnp.asarray(np.random.default_rng(0).integers(-8, 8, (11, D)) / 4.0)
BATCH = REAL.at[0].set(1e30).at[5].set(jnp.nan).at[9].set(-1e30)
MASK = jnp.ones(11, bool).at[0].set(False).at[5].set(False).at[9].set(False)


def _privacy(seed=7, of=None, **changes):
  """A privacy value with reproducible test noise (NOT private) on plain
  arrays (``assume_sampling``: the batches here are given, not sampled)."""
  of = zoprivacy.Exact() if of is None else of
  return zoprivacy.Privacy(
    **{
      "noise": zoprivacy.TestNoise(seed, of=of),
      "noise_multiplier": 1.0,
      "sampling": zoprivacy.Poisson(dataset_size=100, expected_batch_size=8),
      "assume_sampling": True,
      **changes,
    }
  )


def loss(params, example):
  """Elementwise, no sum over features: the same floats in any chunk."""
  return jnp.mean(jnp.square(params["w"] - example))


def _update(factory, size, batch=BATCH, mask=MASK, **kw):
  privacy = _privacy(**kw.pop("privacy", {}))
  tx = factory(privacy, **kw, physical_batch_size=size)
  state = zoprivacy.init(tx, X0)
  step = jax.jit(
    lambda s: tx.update(
      None, s, X0, per_example_loss=loss, batch=batch, mask=mask
    )
  )
  grad, state = step(state)
  return np.asarray(grad["w"]), np.asarray(state.released)


CASES = {
  "dpzero": (zoprivacy.dpzero, dict(smoothing=0.25)),
  "dpzero q=3 counter": (
    zoprivacy.dpzero,
    dict(smoothing=0.25, direction_prng="counter", privacy=dict(num_queries=3)),
  ),
  "dp_sgd": (zoprivacy.dp_sgd, {}),
  "dpgd_zeroth": (zoprivacy.dpgd_zeroth, dict(smoothing=0.25)),
}


@pytest.mark.parametrize(
  "name, size",
  [("dpzero", 1), ("dpzero", 4)] + [(name, 3) for name in CASES],
)
def test_chunked_exact_release_equals_the_whole_batch(name, size):
  """Exact noise, the same secret: the chunked release (and update) is the
  whole batch's bit for bit, and (where the lattice does not depend on the
  padded rows) the release of the real rows alone: the adversarial
  padding reaches no sum."""
  factory, kw = CASES[name]
  whole = _update(factory, None, **kw)
  assert np.all(np.isfinite(whole[0]))
  chunked = _update(factory, size, **kw)
  np.testing.assert_array_equal(chunked[0], whole[0])
  np.testing.assert_array_equal(chunked[1], whole[1])
  if name != "dpgd_zeroth":  # its direction lattice depends on the rows
    real = _update(factory, size, batch=REAL[MASK], mask=None, **kw)
    np.testing.assert_array_equal(real[1], whole[1])


def test_float_noise_release_is_the_whole_batch_to_rounding():
  floats = dict(of=zoprivacy.Float())
  whole = _update(zoprivacy.dp_sgd, None, privacy=floats)
  chunked = _update(zoprivacy.dp_sgd, 3, privacy=floats)
  np.testing.assert_allclose(chunked[0], whole[0], rtol=0, atol=1e-6)


def test_map_rows_and_sum_rows_keep_the_rows_and_their_order():
  """Strided chunks come back in row order; filled rows reach no sum."""
  x = jnp.arange(11.0)
  out = physical_batches.map_rows(lambda b: b * 2.0, x, 4)
  np.testing.assert_array_equal(out, x * 2.0)
  total, chunks = physical_batches.sum_rows(
    lambda b, m: jnp.sum(jnp.where(m, b, 0)), x, None, 4
  )
  assert chunks == 3 and float(total) == float(jnp.sum(x))
  ints, _ = physical_batches.sum_rows(
    lambda b, m: jnp.sum(jnp.where(m, b, 0)), x.astype(jnp.int32) + 1, x < 5, 4
  )
  assert int(ints) == 15  # rows 0..4, plus one each
  with pytest.raises(ValueError, match="physical_batch_size"):
    zoprivacy.dpzero(_privacy(), physical_batch_size=0)


class _Model(nn.Module):
  """Dense layers over 3 positions: ghost norms sum position pairs."""

  @nn.compact
  def __call__(self, x):
    return nn.Dense(2)(nn.tanh(nn.Dense(6)(x))).sum()


def _ghost_sums(params, model_loss, x, mask, size):
  bounds = []  # static: recorded as the sum is traced

  @jax.jit
  def sums_of(params, x, mask):
    args = base.parse_extra_args(
      dict(per_example_loss=model_loss, batch=x, mask=mask), size
    )
    sums, bound = ghost_clipping.certified_clipped_sum(args, params, clip=0.5)
    bounds.append(bound)
    return jnp.concatenate([v.reshape(-1) for v in jax.tree.leaves(sums)])

  flat = sums_of(params, x, mask)
  return np.asarray(flat, np.float64), bounds[-1]


def test_ghost_exact_noise_bound_covers_the_chunk_additions():
  """Exact noise on ghost clipping rounds a float sum. Over 4 chunks of 3
  rows the certified bound is that of one sum of ``L + n - 1`` terms (here
  9 + 3 = 12, against 30 whole), and the two float sums lie within
  ``E_chunked + E_whole`` of each other (the stated tolerance: each is
  within its own bound of the exact clipped sum). The chunked bound is the
  smaller, so its noise is no larger. With the same secret and the same
  integer sigma, the releases differ by at most ``|dS_j| / gamma + 1``
  grid steps ``gamma`` per coordinate (each rounding moves by half)."""
  model = _Model()
  x = np.random.default_rng(1).normal(size=(10, 3, 4))
  x[2] *= 1e4  # far above the clip
  x[4, 1] = -x[4, 0]  # positions that cancel
  x[7] = 1e30  # a padding row, masked
  x = jnp.asarray(x, jnp.float32)
  mask = jnp.ones(10, bool).at[7].set(False)
  params = model.init(jax.random.key(0), x[0])["params"]
  model_loss = lambda p, xb: model.apply({"params": p}, xb)
  whole, whole_bound = _ghost_sums(params, model_loss, x, mask, None)
  chunked, bound = _ghost_sums(params, model_loss, x, mask, 3)
  assert (bound.rows, bound.length) == (12, 3 * 3 + 4 - 1)
  assert (whole_bound.rows, whole_bound.length) == (10, 30)
  assert bound.error(0.5) < whole_bound.error(0.5) * 0.55  # 13 * 12 / (31 * 10)
  gap = np.linalg.norm(chunked - whole)
  assert gap <= bound.error(0.5) + whole_bound.error(0.5)
  assert np.all(np.isfinite(whole)) and np.linalg.norm(whole) > 0.5

  mech = rsm.RoundedSumDiscreteGaussianMechanism(0.5, 1.0)
  k = mech.grid_exponent(bound, whole.size)
  assert k == mech.grid_exponent(whole_bound, whole.size)
  assert mech.integer_sigma(bound, whole.size, k) <= mech.integer_sigma(
    whole_bound, whole.size, k
  )

  def released(size):
    # a multiplier small enough that both integer sigmas are 1
    tx = zoprivacy.dp_sgd(
      _privacy(3, clip=0.5, noise_multiplier=1e-6),
      per_example_clipping="ghost",
      physical_batch_size=size,
    )
    g, _ = jax.jit(
      lambda s: tx.update(
        None, s, params, per_example_loss=model_loss, batch=x, mask=mask
      )
    )(zoprivacy.init(tx, params))
    return np.concatenate([np.ravel(v) for v in jax.tree.leaves(g)])

  gamma = 2.0**-k
  steps = np.abs(released(3) - released(None)) * 8.0 / gamma
  assert np.all(steps <= np.abs(chunked - whole) / gamma + 1.0 + 1e-6)


def _compiled_peak(factory, size, rows=1024, **kw):
  """The compiled peak (arguments + outputs + temporaries - aliased) of
  one step on a batch of ``rows`` (abstract: nothing is allocated), for a
  loss whose hidden layer is materialized (a cumulative sum reads it)."""
  params = {"w": jnp.zeros((32, 256)), "v": jnp.zeros((256, 8))}

  def per_example(p, x):
    h = jnp.tanh(x @ p["w"])
    return jnp.sum(h @ p["v"]) + jnp.max(jnp.cumsum(h))

  tx = factory(_privacy(**kw), physical_batch_size=size)
  batch = jax.ShapeDtypeStruct((rows, 32), jnp.float32)
  step = jax.jit(
    lambda s, b: tx.update(
      None, s, params, per_example_loss=per_example, batch=b
    )
  )
  state = zoprivacy.init(tx, params)
  m = step.lower(state, batch).compile().memory_analysis()
  return (
    m.argument_size_in_bytes
    + m.output_size_in_bytes
    + m.temp_size_in_bytes
    - m.alias_size_in_bytes
  )


@pytest.mark.parametrize(
  "factory, cap_mib, ratio",
  [(zoprivacy.dp_sgd, 32.0, 8.0), (zoprivacy.dpzero, 2.0, 3.0)],
)
def test_the_compiled_peak_falls_with_the_chunk(factory, cap_mib, ratio):
  """A logical batch of 1,024 rows over a memory cap: DP-SGD's
  per-example gradients (10,240 floats a row) and DPZero's hidden layer
  (256 a row) need more than ``cap_mib`` at once, and ``ratio`` times less
  in physical chunks of 64."""
  whole = _compiled_peak(factory, None, of=zoprivacy.Float())
  chunked = _compiled_peak(factory, 64, of=zoprivacy.Float())
  assert whole > cap_mib * 2**20 > chunked
  assert chunked * ratio < whole, (whole, chunked)
