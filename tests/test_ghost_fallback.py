"""Ghost clipping says when it falls back to explicit per-example gradients:
once per trace, which parameters, their share of the model and why."""

import re
import warnings

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
import pytest

import zoprivacy
from zoprivacy.first_order.ghost_fallback import GhostClippingFallbackWarning

KEY = jax.random.key(0)


def _data(batch):
  x = jax.random.normal(KEY, (batch, 16))
  return x, jnp.arange(batch) % 3


def _ce(logits, y):
  return optax.softmax_cross_entropy_with_integer_labels(logits, y)


def _plain():
  params = {
    "w1": jax.random.normal(KEY, (16, 32)) * 0.1,
    "b1": jnp.zeros(32),
    "w2": jax.random.normal(KEY, (32, 3)) * 0.1,
  }

  def loss(p, batch):
    h = jnp.tanh(batch[0] @ p["w1"] + p["b1"])
    return _ce(h @ p["w2"], batch[1])

  return params, loss


class _Mixed(nn.Module):
  """Two Dense layers and a scale declared outside any leaf layer."""

  @nn.compact
  def __call__(self, x):
    scale = self.param("scale", nn.initializers.ones, (32,))
    return nn.Dense(3)(jnp.tanh(nn.Dense(32)(x)) * scale)


def _flax(module):
  params = module.init(KEY, jnp.zeros((1, 16)))["params"]
  return params, lambda p, b: _ce(module.apply({"params": p}, b[0]), b[1])


def _warnings_of_steps(params, loss, batches):
  """The fallback warnings of jitted dp_sgd ghost steps on ``batches``."""
  est = zoprivacy.dp_sgd(
    noise_multiplier=1.0,
    expected_batch_size=8,
    dataset_size=100,
    per_example_clipping="ghost",
    noise="secure_mode",
  )
  tx = optax.chain(est, optax.sgd(0.1))
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    state = tx.init(params)
    step = zoprivacy.make_step(tx, loss)
    for batch in batches:
      params, state = step(params, state, batch)
  return [
    str(w.message)
    for w in caught
    if issubclass(w.category, GhostClippingFallbackWarning)
  ]


def test_plain_functions_fall_back_entirely_said_once_per_trace():
  params, loss = _plain()
  said = _warnings_of_steps(params, loss, [_data(8)] * 3 + [_data(6)])
  assert len(said) == 2  # 4 steps, 2 traces (batch 8, then batch 6)
  text = said[0]
  assert said[1] == text and "\n" not in text
  assert "3 parameter array(s), 640 of 640 parameters (100.0% of" in text
  assert all(f"['{n}']" in text for n in ("w1", "b1", "w2"))
  assert "a model written as plain functions" in text
  assert "coverage(loss, params, batch)" in text


def test_flax_dense_layers_do_not_warn():
  params, loss = _flax(nn.Sequential([nn.Dense(32), jnp.tanh, nn.Dense(3)]))
  assert _warnings_of_steps(params, loss, [_data(8)] * 2) == []


def test_a_parameter_outside_a_leaf_layer_is_named_with_its_share():
  params, loss = _flax(_Mixed())
  total = sum(x.size for x in jax.tree.leaves(params))
  (text,) = _warnings_of_steps(params, loss, [_data(8)])
  assert f"1 parameter array(s), 32 of {total:,} parameters" in text
  share = float(re.search(r"\(([\d.]+)% of the model\)", text).group(1))
  assert share == pytest.approx(100 * 32 / total, abs=0.05)
  assert "['scale']" in text and "Dense" not in text.split("why")[0]


def test_a_shared_parameter_is_named_with_the_reason():
  params, loss = _flax(nn.Sequential([nn.Dense(32), jnp.tanh, nn.Dense(3)]))

  def regularized(p, batch):
    kernel = p["layers_0"]["kernel"]
    return loss(p, batch) + 0.1 * jnp.sum(jnp.square(kernel))

  (text,) = _warnings_of_steps(params, regularized, [_data(8)])
  assert "2 parameter array(s), 544 of 643 parameters" in text
  assert "['layers_0']['bias'], ['layers_0']['kernel']" in text
  assert "outside their layer's call" in text
