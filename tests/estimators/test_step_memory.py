"""Compiled peak memory of the generic two-point step with regenerated
(counter-hash) directions, over the forward pass: one perturbed leaf at a
time, and never a materialized direction."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoprivacy
from zoprivacy.models import small
from zoprivacy.zo import blockwise_dot, directions


def _peak(compiled) -> int:
  m = compiled.memory_analysis()
  return (
    m.argument_size_in_bytes
    + m.output_size_in_bytes
    + m.temp_size_in_bytes
    - m.alias_size_in_bytes
  )


def _mlp_step_extra(hidden, batch_size, kind):
  """``(params, extra)``: an MLP's parameters and a function giving the
  compiled peak of its donated counter-hash dpzero step over its forward
  pass's (compiled anew on each call)."""
  model = small.MLP(num_classes=10, hidden=hidden)
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(batch_size, 16, 16, 1)).astype(np.float32))
  y = jnp.asarray(rng.integers(0, 10, size=batch_size).astype(np.int32))
  params = model.init(jax.random.key(0), x[:1])

  def loss(p, b):
    logits = model.apply(p, b[0])
    return optax.softmax_cross_entropy_with_integer_labels(logits, b[1])

  tx = optax.chain(
    zoprivacy.dpzero(
      clip=1.0,
      noise_multiplier=1.0,
      smoothing=1e-3,
      expected_batch_size=batch_size,
      directions=kind,
      direction_prng="counter",
    ),
    optax.sgd(1e-3),
  )

  def step(p, s, b):
    updates, s = tx.update(p, s, p, batched_loss=loss, batch=b)
    return optax.apply_updates(p, updates), s

  def extra():
    state = zoprivacy.init(tx, params)
    lowered = jax.jit(step, donate_argnums=(0, 1)).lower(params, state, (x, y))
    forward = jax.jit(loss).lower(params, (x, y)).compile()
    return _peak(lowered.compile()) - _peak(forward)

  return params, extra


@pytest.mark.parametrize(
  "kind",
  ["gaussian", "rademacher", pytest.param("sphere", marks=pytest.mark.slow)],
)
def test_generic_step_memory_over_the_forward_pass(kind):
  params, extra = _mlp_step_extra((256, 256, 256), 32, kind)
  param_bytes = sum(v.nbytes for v in jax.tree.leaves(params))
  # Each leaf of x +- l u is formed where the loss reads it (the x - l u
  # copy after the x + l u product), so the largest leaf (with the bias
  # read next to it) bounds the extra memory; the update is written over
  # the donated parameters. The two passes run side by side, so one
  # layer's activations of the other pass are live too ([32, 256] float32,
  # 32 KiB). The sphere's norm pass draws a quarter of a leaf at a time
  # (XLA's CPU reduction keeps three chunk-sized buffers). 8 KiB: a
  # perturbed bias, keys and scalars.
  largest = max(v.nbytes for v in jax.tree.leaves(params))
  assert largest < param_bytes / 3
  assert extra() <= largest + 32 * 256 * 4 + 8192


@pytest.mark.parametrize(
  "kind",
  ["gaussian", pytest.param("sphere", marks=pytest.mark.slow)],
)
def test_a_large_dense_kernel_is_never_copied_whole(kind, monkeypatch):
  """A 1024 x 1024 kernel (4 MiB, 2^20 elements) read by one ``x @ W`` is
  perturbed in blocks inside the product: the step's compiled peak over
  the forward pass is then under half the kernel (the two passes side by
  side take blocks of 2^16 elements, each drawn once, one iteration ahead,
  for both passes), against
  more than the whole kernel when the perturbed leaf is formed whole. (The
  sphere, slow: the same blocks.)"""

  params, extra = _mlp_step_extra((1024, 1024), 16, kind)
  largest = max(v.nbytes for v in jax.tree.leaves(params))
  assert largest == 4 * 2**20
  assert extra() <= 0.5 * largest
  monkeypatch.setattr(blockwise_dot, "DOT_BLOCK_MIN_ELEMENTS", 2**40)
  jax.clear_caches()  # traces are cached per function
  assert extra() >= largest


def test_key_after_keeps_the_key_and_the_direction():
  key = jax.random.key(3)
  after = (jnp.array([jnp.nan, 1.0]), jnp.array(jnp.inf), jnp.zeros(2))
  moved = jax.jit(directions.key_after)(key, *after)
  np.testing.assert_array_equal(
    jax.random.key_data(moved), jax.random.key_data(key)
  )
  raw = jnp.array([7, 9], jnp.uint32)
  np.testing.assert_array_equal(directions.key_after(raw, after), raw)
  params = {"w": jnp.zeros((5, 3))}
  draw = directions.get_sampler("gaussian", prng="counter")
  np.testing.assert_array_equal(
    draw(moved, params)["w"], draw(key, params)["w"]
  )


def test_the_blockwise_sum_is_not_started_from_a_copied_zeros():
  """At batch 256 the blockwise product's output, ``[256, 1024]``, is as
  large as a block of one pass (1 MiB). Each sum starts from the first
  block's product and is added into in place: per pass a perturbed half
  block, the next block's product and the running sum, 5 MiB over the
  forward pass for the two passes side by side (5.13 measured). Started
  from zeros, XLA copies the
  zeros (one constant shared by the loops) into each loop first (1 MiB
  more, measured when the passes ran one after the other)."""
  _, extra = _mlp_step_extra((1024, 1024), 256, "gaussian")
  assert extra() <= 5.5 * 2**20


@pytest.mark.slow  # three compilations of a 1.3M-parameter step
def test_make_step_is_donated_and_lean():
  """``zoprivacy.make_step``'s compiled peak is at most 1.5x the parameters
  plus the forward pass's activations (its peak over the parameters), with
  no option about donation; a plain ``jax.jit`` of the same step keeps one
  more copy of the parameters. The call consumes the arrays it is given."""
  model = small.MLP(num_classes=10, hidden=(1024, 1024))  # 1.3M parameters
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(64, 16, 16, 1)).astype(np.float32))
  y = jnp.asarray(rng.integers(0, 10, size=64).astype(np.int32))
  params = model.init(jax.random.key(0), x[:1])

  def loss(p, b):
    logits = model.apply(p, b[0])
    return optax.softmax_cross_entropy_with_integer_labels(logits, b[1])

  tx = optax.chain(
    zoprivacy.dpzero(
      clip=1.0, noise_multiplier=1.0, smoothing=1e-3, expected_batch_size=64
    ),
    optax.sgd(1e-3),
  )
  state = zoprivacy.init(tx, params)
  step = zoprivacy.make_step(tx, loss)
  param_bytes = sum(v.nbytes for v in jax.tree.leaves(params))
  activations = _peak(jax.jit(loss).lower(params, (x, y)).compile())
  activations -= param_bytes
  peak = _peak(step.lower(params, state, (x, y)).compile())
  assert peak <= 1.5 * param_bytes + activations
  plain = jax.jit(step.__wrapped__).lower(params, state, (x, y)).compile()
  assert _peak(plain) >= peak + 0.5 * param_bytes
  before = jax.tree.map(lambda v: np.array(v, copy=True), params)
  new_params, _ = step(params, state, (x, y), jnp.ones(64, bool))
  assert all(v.is_deleted() for v in jax.tree.leaves(params))
  moved = [
    float(np.abs(np.asarray(a) - b).max())
    for a, b in zip(jax.tree.leaves(new_params), jax.tree.leaves(before))
  ]
  assert max(moved) > 0
