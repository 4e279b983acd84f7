"""Freezing: split trees and Flax NNX train; optax.partition is refused clearly."""

import warnings

import jax
import jax.numpy as jnp
import optax
import pytest
from flax import nnx

import zoprivacy
from zoprivacy.core import nnx_support
from zoprivacy.training import nnx_optimizer

X = jax.random.normal(jax.random.key(1), (64, 4))
Y = X @ jnp.arange(4.0)


class Model(nnx.Module):
  def __init__(self, rngs):
    self.l1 = nnx.Linear(4, 8, rngs=rngs)
    self.norm = nnx.LayerNorm(8, rngs=rngs)
    self.l2 = nnx.Linear(8, 1, rngs=rngs)

  def __call__(self, x):
    return self.l2(jax.nn.relu(self.norm(self.l1(x))))[..., 0]


def _dpzero():
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return zoprivacy.dpzero(
      clip=50.0,
      noise_multiplier=0.05,
      smoothing=1e-3,
      expected_batch_size=64,
      dataset_size=64,
      num_queries=4,
      insecure_test_noise_seed=0,
    )


def test_nnx_optimizer_trains_with_a_private_estimator():
  model = Model(nnx.Rngs(0))
  est = _dpzero()
  optimizer = nnx_optimizer.optimizer(
    model, optax.chain(est, optax.sgd(1e-2)), wrt=nnx.Param
  )
  loss = nnx_support.batched_loss(model, lambda m, b: (m(b[0]) - b[1]) ** 2)

  @nnx.jit
  def step(model, optimizer, batch):
    zeros = jax.tree.map(jnp.zeros_like, nnx.state(model, nnx.Param))
    optimizer.update(model, zeros, batched_loss=loss, batch=batch)

  mean = lambda: float(jnp.mean(loss(nnx.state(model, nnx.Param), (X, Y))))
  before = mean()
  for _ in range(150):
    step(model, optimizer, (X, Y))
  assert mean() < 0.3 * before
  assert zoprivacy.find_plan(optimizer.opt_state) == est.privacy_plan


def test_a_plain_nnx_optimizer_is_refused_before_any_release():
  """``nnx.Optimizer`` makes its state with ``tx.init`` alone: the
  composition around the estimator was never checked."""
  model = Model(nnx.Rngs(0))
  optimizer = nnx.Optimizer(
    model,
    optax.MultiSteps(optax.chain(_dpzero(), optax.sgd(1e-2)), 2),
    wrt=nnx.Param,
  )
  loss = nnx_support.batched_loss(model, lambda m, b: (m(b[0]) - b[1]) ** 2)
  zeros = jax.tree.map(jnp.zeros_like, nnx.state(model, nnx.Param))
  with pytest.raises(ValueError, match="zoprivacy.init"):
    optimizer.update(model, zeros, batched_loss=loss, batch=(X, Y))
  with pytest.raises(ValueError, match="optax.MultiSteps wraps"):
    nnx_optimizer.optimizer(model, optimizer.tx, wrt=nnx.Param)


def test_split_tree_freezing_trains_only_the_trainable_part():
  params = {"w": jnp.zeros(4), "frozen_scale": jnp.asarray(2.0)}
  trainable = {"w": params["w"]}
  frozen = {"frozen_scale": params["frozen_scale"]}
  loss = lambda p, b: (b[0] @ p["w"] * frozen["frozen_scale"] - b[1]) ** 2
  tx = optax.chain(_dpzero(), optax.sgd(2e-3))
  state = zoprivacy.init(tx, trainable)

  @jax.jit
  def step(p, s):
    u, s = tx.update(
      jax.tree.map(jnp.zeros_like, p),
      s,
      p,
      batched_loss=loss,
      batch=(X, Y),
    )
    return optax.apply_updates(p, u), s

  before = float(jnp.mean(loss(trainable, (X, Y))))
  for _ in range(200):
    trainable, state = step(trainable, state)
  assert float(jnp.mean(loss(trainable, (X, Y)))) < 0.3 * before
  assert float(frozen["frozen_scale"]) == 2.0


@pytest.mark.parametrize("wrap", ["partition", "masked"])
def test_partition_and_masked_freezing_give_a_clear_error(wrap):
  params = {"a": jnp.ones(3), "b": jnp.ones(2)}
  if wrap == "partition":
    tx = optax.partition(
      {"train": _dpzero(), "freeze": optax.set_to_zero()},
      {"a": "train", "b": "freeze"},
    )
  else:
    tx = optax.masked(_dpzero(), {"a": True, "b": False})
  state = zoprivacy.init(tx, params)
  loss = lambda p, b: jnp.sum(p["a"]) + jnp.sum(p["b"]) + b * 0.0
  with pytest.raises(ValueError, match="docs/freezing.md"):
    tx.update(
      jax.tree.map(jnp.zeros_like, params),
      state,
      params,
      batched_loss=loss,
      batch=jnp.zeros(4),
    )
