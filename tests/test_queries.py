"""Loss queries at perturbed parameters: the layer-by-layer evaluation
gives the values of the materialized perturbation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoprivacy.core import low_precision
from zoprivacy.zo import blockwise_dot, directions, queries


def _params():
  rng = np.random.default_rng(0)
  return {
    "w1": jnp.asarray(rng.normal(size=(6, 5)), jnp.float32),
    "b1": jnp.asarray(rng.normal(size=(5,)), jnp.float32),
    "stack": jnp.asarray(rng.normal(size=(3, 5, 5)), jnp.float32),
    "w2": jnp.asarray(rng.normal(size=(5, 2)), jnp.float32),
    "unused": jnp.ones((4,), jnp.float32),
    "scale": jnp.asarray(1.5, jnp.bfloat16),
  }


@jax.jit
def _nested_head(h, w):  # a jitted call inside the loss
  return jnp.tanh(h @ w)


def _loss(p, batch):
  x, y = batch
  h = jax.nn.relu(x @ p["w1"] + p["b1"])  # custom_jvp inside

  def layer(h, w):
    return jax.nn.gelu(h @ w), None

  h, _ = jax.lax.scan(layer, h, p["stack"])
  out = _nested_head(h, p["w2"]) * p["scale"].astype(jnp.float32)
  return jnp.sum((out - y) ** 2, axis=-1)


@pytest.mark.parametrize("name", ["gaussian", "rademacher"])
@pytest.mark.parametrize("scale", [1e-3, -0.5])
def test_first_use_perturbation_equals_the_materialized_one(name, scale):
  params = _params()
  rng = np.random.default_rng(1)
  batch = (
    jnp.asarray(rng.normal(size=(4, 6)), jnp.float32),
    jnp.asarray(rng.normal(size=(4, 2)), jnp.float32),
  )
  key = jax.random.key(7)
  sampler = directions.get_sampler(name, prng="counter")

  @jax.jit
  def materialized(params, batch):
    return _loss(queries.perturb(params, sampler(key, params), scale), batch)

  @jax.jit
  def first_use(params, batch):
    def perturb_leaf(i, leaf, after):
      # as queries.perturb: u drawn and added in float32 for the 16-bit
      # leaf (low_precision), in the leaf's dtype otherwise
      dtype = low_precision.compute_dtype(leaf)
      u = directions.leaf_slice(
        name, directions.key_after(key, after), i, leaf.shape, dtype
      )
      return low_precision.perturbed(leaf, scale * u)

    return queries.loss_perturbed_at_first_use(
      _loss, params, batch, perturb_leaf
    )

  want = materialized(params, batch)
  got = first_use(params, batch)
  assert got.shape == (4,)
  # The same operations; XLA may fuse them differently (a multiply-add
  # contracted or not), so float32 rounding only.
  np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
  # And the perturbation matters: not the unperturbed loss.
  assert not np.array_equal(np.asarray(got), np.asarray(_loss(params, batch)))


def test_a_parameter_returned_by_the_loss_is_perturbed_too():
  params = {"w": jnp.zeros((3,))}

  def perturb_leaf(i, leaf, after):
    return leaf + 1.0

  out = queries.loss_perturbed_at_first_use(
    lambda p, b: p["w"], params, None, perturb_leaf
  )
  np.testing.assert_array_equal(out, np.ones(3))


def _dense_params():
  rng = np.random.default_rng(2)
  return {
    "w1": jnp.asarray(rng.normal(size=(64, 48)) / 8, jnp.float32),
    "w2": jnp.asarray(rng.normal(size=(48, 48)) / 7, jnp.float32),
  }


def _dense_loss(p, x):
  h = jnp.tanh(x @ p["w1"])  # w1: read once, by x @ w1
  h = jnp.tanh(h @ p["w2"])  # w2: read twice
  return jnp.sum(jnp.tanh(h @ p["w2"]) ** 2, axis=-1)


@pytest.mark.parametrize("name", ["gaussian", "rademacher"])
def test_blockwise_perturbed_dot_equals_the_materialized_one(name, monkeypatch):
  """A kernel read once by ``x @ W`` is perturbed block by block of rows
  inside the product (a loop in the jaxpr); a kernel read twice is formed
  whole. Same values as the materialized perturbation, to float32
  rounding."""
  params = _dense_params()
  x = jnp.asarray(np.random.default_rng(3).normal(size=(5, 64)), jnp.float32)
  key, scale = jax.random.key(8), 1e-2
  sampler = directions.get_sampler(name, prng="counter")
  materialized = jax.jit(  # one program (op by op: most of the test's time)
    lambda p, x: _dense_loss(queries.perturb(p, sampler(key, p), scale), x)
  )
  want = materialized(params, x)

  def first_use(params, x):
    def perturb_leaf(i, leaf, after, start=0):
      u = directions.leaf_slice(
        name,
        directions.key_after(key, after),
        i,
        leaf.shape,
        leaf.dtype,
        start=start,
      )
      return leaf + (scale * u).astype(leaf.dtype)

    return queries.loss_perturbed_at_first_use(
      _dense_loss, params, x, perturb_leaf
    )

  monkeypatch.setattr(blockwise_dot, "DOT_BLOCK_MIN_ELEMENTS", 2048)
  monkeypatch.setattr(blockwise_dot, "DOT_BLOCK_ELEMENTS", 16 * 48)  # 4 blocks
  blocked = jax.make_jaxpr(first_use)(params, x)
  loops = [e for e in blocked.eqns if e.primitive.name in ("scan", "while")]
  assert len(loops) == 1  # w1 only: w2 is read twice
  got = jax.jit(first_use)(params, x)
  np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
  assert not np.allclose(np.asarray(got), np.asarray(_dense_loss(params, x)))
  # Several devices (the kernel may be sharded) or a smaller kernel: whole.
  for patch in (
    lambda: monkeypatch.setattr(jax, "device_count", lambda: 8),
    lambda: monkeypatch.setattr(blockwise_dot, "DOT_BLOCK_MIN_ELEMENTS", 2**40),
  ):
    monkeypatch.undo()
    monkeypatch.setattr(blockwise_dot, "DOT_BLOCK_MIN_ELEMENTS", 2048)
    monkeypatch.setattr(blockwise_dot, "DOT_BLOCK_ELEMENTS", 16 * 48)
    patch()
    jax.clear_caches()  # traces are cached per function
    whole = jax.make_jaxpr(first_use)(params, x)
    assert not [e for e in whole.eqns if e.primitive.name in ("scan", "while")]


def test_a_kernel_with_too_many_small_blocks_takes_fewer_larger_ones(
  monkeypatch,
):
  """Where the memory bound gives more than ``_MAX_DOT_BLOCKS`` row blocks
  (a 4096 x 1536 kernel: 128 blocks of 32 rows), the product takes the
  fewest larger blocks within that count rather than forming the
  perturbed kernel whole."""
  params = _dense_params()
  x = jnp.asarray(np.random.default_rng(3).normal(size=(5, 64)), jnp.float32)
  key = jax.random.key(8)
  want = _dense_loss(
    queries.perturb(
      params,
      directions.get_sampler("gaussian", prng="counter")(key, params),
      1e-2,
    ),
    x,
  )

  def first_use(params, x):
    def perturb_leaf(i, leaf, after, start=0):
      u = directions.leaf_slice(
        "gaussian", key, i, leaf.shape, leaf.dtype, start=start
      )
      return leaf + (1e-2 * u).astype(leaf.dtype)

    return queries.loss_perturbed_at_first_use(
      _dense_loss, params, x, perturb_leaf
    )

  monkeypatch.setattr(blockwise_dot, "DOT_BLOCK_MIN_ELEMENTS", 2048)
  monkeypatch.setattr(blockwise_dot, "DOT_BLOCK_ELEMENTS", 3 * 48)  # 1 row
  monkeypatch.setattr(blockwise_dot, "_MAX_DOT_BLOCKS", 8)  # 64 rows
  blocked = jax.make_jaxpr(first_use)(params, x)
  loops = [e for e in blocked.eqns if e.primitive.name in ("scan", "while")]
  assert len(loops) == 1
  # The carried block of l u: 8 rows of 48.
  assert any(v.aval.shape == (8, 48) for v in loops[0].outvars)
  got = jax.jit(first_use)(params, x)
  np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("prng", directions.COUNTER_PRNGS)
def test_two_passes_equal_the_materialized_perturbations(prng, monkeypatch):
  """Both passes side by side (as a two-point step evaluates them): w1,
  read once by ``x @ w1`` with ``x`` the batch itself, is one plain product
  plus and minus ``x @ (l U)`` summed over row blocks; w2 is formed whole.
  The losses of ``x + l u`` and ``x - l u``, to float32 rounding."""
  params = _dense_params()
  x = jnp.asarray(np.random.default_rng(3).normal(size=(5, 64)), jnp.float32)
  key, scale = jax.random.key(8), 1e-2
  u = directions.get_sampler("gaussian", prng=prng)(key, params)
  want = [
    _dense_loss(queries.perturb(params, u, s), x) for s in (scale, -scale)
  ]

  def both(params, x):
    def perturb_lanes(i, leaf, after, lanes, start=0):
      step = scale * directions.leaf_slice(
        "gaussian",
        directions.key_after(key, after),
        i,
        leaf.shape,
        leaf.dtype,
        start=start,
        prng=prng,
      )
      return tuple(leaf + (step, -step)[k] for k in lanes)

    return queries.losses_perturbed_at_first_use(
      _dense_loss, params, x, perturb_lanes
    )

  monkeypatch.setattr(blockwise_dot, "DOT_BLOCK_MIN_ELEMENTS", 2048)
  monkeypatch.setattr(blockwise_dot, "DOT_BLOCK_ELEMENTS", 16 * 48)  # 4 blocks
  blocked = jax.make_jaxpr(both)(params, x)
  loops = [e for e in blocked.eqns if e.primitive.name in ("scan", "while")]
  assert len(loops) == 1  # w1's blocks of l U (8 rows: half the budget)
  assert [v.aval.shape for v in loops[0].outvars][-1] == (5, 48)
  got = jax.jit(both)(params, x)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)
  assert not np.allclose(np.asarray(got[0]), np.asarray(got[1]))
