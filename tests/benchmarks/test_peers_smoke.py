"""Smoke tests of the peer benchmark's step builders on a tiny MLP.

The first-order steps (zoprivacy DP-SGD explicit and ghost, optax.contrib.
dpsgd, jax_privacy) must give finite parameters of the right shapes and,
with negligible noise, the same clipped-mean SGD update (Abadi et al. 2016,
Alg. 1); dpzero must give a finite update along one direction; the torch
port of the DPZero step must restore the parameters exactly when its
learning rate is zero and release ``sum_i clip(d_i) / B`` (Zhang et al.
2024, Alg. 2 line 3) when its noise is negligible.
"""

import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoprivacy
from zoprivacy.models import small

sys.path.insert(
  0, str(pathlib.Path(__file__).parents[2] / "benchmarks" / "peers")
)
import jax_steps  # noqa: E402

BATCH, LR, CLIP = 6, 0.1, 0.05  # CLIP small: every example is clipped
TINY_SIGMA = 1e-9  # noise std 5e-11 per coordinate: invisible at atol 1e-6


def _task():
  model = small.MLP(num_classes=3, hidden=(5,))
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(BATCH, 4, 4, 1)).astype(np.float32))
  y = jnp.asarray(rng.integers(0, 3, size=BATCH).astype(np.int32))
  params = model.init(jax.random.key(0), x[:1])

  def batched_loss(p, batch):
    return optax.softmax_cross_entropy_with_integer_labels(
      model.apply(p, batch[0]), batch[1]
    )

  return batched_loss, params, (x, y)


def _clip(tree):
  factor = min(1.0, CLIP / float(optax.tree.norm(tree)))
  return jax.tree.map(lambda g: g * factor, tree)


def _first_order_steps(batched_loss, params):
  steps = {}
  for mode in ("explicit", "ghost"):
    est = zoprivacy.dp_sgd(
      clip=CLIP,
      noise_multiplier=TINY_SIGMA,
      expected_batch_size=BATCH,
      per_example_clipping=mode,
      insecure_test_noise_seed=1,
      noise="secure_mode",  # ghost has no exact path: same noise for both
    )
    steps[mode] = jax_steps.zoprivacy_step(
      est, batched_loss, params, learning_rate=LR
    )
  steps["optax"] = jax_steps.optax_dpsgd_step(
    batched_loss,
    params,
    clip=CLIP,
    noise_multiplier=TINY_SIGMA,
    learning_rate=LR,
    insecure_test_noise_seed=2,
  )
  return steps


def _run(step, state, params, batch):
  copy = jax.tree.map(jnp.copy, params)  # the step donates its params
  new_params, _ = step(copy, state, batch)
  return new_params


def _assert_same_shapes_and_finite(new, old):
  assert jax.tree.structure(new) == jax.tree.structure(old)
  for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(old)):
    assert a.shape == b.shape and a.dtype == b.dtype
    assert bool(jnp.all(jnp.isfinite(a)))


def test_first_order_steps_agree_on_the_clipped_mean_update():
  batched_loss, params, batch = _task()
  steps = _first_order_steps(batched_loss, params)
  if jax_steps_has_jax_privacy():
    steps["jax_privacy"] = jax_steps.jax_privacy_step(
      batched_loss,
      params,
      clip=CLIP,
      noise_multiplier=TINY_SIGMA,
      expected_batch_size=BATCH,
      learning_rate=LR,
      insecure_test_noise_seed=3,
    )
  # Reference: -LR/B sum_i clip_C(grad_i), per-example gradients by hand.
  grads = [
    jax.grad(
      lambda p, i=i: batched_loss(
        p, (batch[0][i : i + 1], batch[1][i : i + 1])
      )[0]
    )(params)
    for i in range(BATCH)
  ]
  clipped = [_clip(g) for g in grads]
  expected = jax.tree.map(
    lambda p, *gs: p - LR * sum(gs) / BATCH, params, *clipped
  )
  assert (
    float(optax.tree.norm(jax.tree.map(jnp.subtract, expected, params))) > 1e-3
  )
  for name, (step, state) in steps.items():
    new = _run(step, state, params, batch)
    _assert_same_shapes_and_finite(new, params)
    for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(expected)):
      np.testing.assert_allclose(a, b, atol=1e-6, err_msg=name)


def jax_steps_has_jax_privacy():
  try:
    import jax_privacy  # noqa: F401
  except ImportError:
    return False
  return True


def test_jax_privacy_step_is_finite():
  pytest.importorskip("jax_privacy")
  batched_loss, params, batch = _task()
  step, state = jax_steps.jax_privacy_step(
    batched_loss,
    params,
    clip=CLIP,
    noise_multiplier=1.0,
    expected_batch_size=BATCH,
    learning_rate=LR,
    insecure_test_noise_seed=4,
  )
  _assert_same_shapes_and_finite(_run(step, state, params, batch), params)


@pytest.mark.parametrize("prng", ["threefry", "counter"])
def test_dpzero_step_moves_along_one_direction(prng):
  batched_loss, params, batch = _task()
  est = zoprivacy.dpzero(
    clip=CLIP,
    noise_multiplier=1.0,
    smoothing=1e-3,
    expected_batch_size=BATCH,
    directions="gaussian",
    direction_prng=prng,
    insecure_test_noise_seed=5,
  )
  step, state = jax_steps.zoprivacy_step(
    est, batched_loss, params, learning_rate=LR
  )
  new = _run(step, state, params, batch)
  _assert_same_shapes_and_finite(new, params)
  delta = jnp.concatenate(
    [
      (a - b).ravel()
      for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(params))
    ]
  )
  assert float(jnp.linalg.norm(delta)) > 0  # noise std 1/6: never exactly 0


def _torch_step(torch, torch_dpzero, *, learning_rate, noise_multiplier):
  torch.manual_seed(0)
  model = torch_dpzero.build_mlp(in_shape=(1, 4, 4), hidden=(5,), num_classes=3)
  rng = np.random.default_rng(0)
  x = torch.from_numpy(rng.normal(size=(BATCH, 1, 4, 4)).astype(np.float32))
  y = torch.from_numpy(rng.integers(0, 3, size=BATCH).astype(np.int64))
  step = torch_dpzero.DPZeroStep(
    model,
    learning_rate=learning_rate,
    smoothing=1e-2,
    clip=CLIP,
    noise_multiplier=noise_multiplier,
    expected_batch_size=BATCH,
    direction_seed=7,
    insecure_test_noise_seed=8,
  )
  return model, step, x, y


def test_torch_port_restores_parameters_and_releases_the_clipped_mean():
  torch = pytest.importorskip("torch")
  torch_dpzero = pytest.importorskip("torch_dpzero")
  model, step, x, y = _torch_step(
    torch, torch_dpzero, learning_rate=0.0, noise_multiplier=TINY_SIGMA
  )
  before = [p.detach().clone() for p in model.parameters()]
  g = step(x, y)
  for a, b in zip(model.parameters(), before):
    torch.testing.assert_close(a.detach(), b, atol=1e-6, rtol=0)
  # The same two evaluations by hand, u regenerated from the step's seed.
  seed = int(np.random.default_rng(7).integers(1_000_000_000))
  torch.manual_seed(seed)
  us = [torch.normal(0.0, 1.0, size=p.shape) for p in model.parameters()]
  with torch.no_grad():
    losses = []
    for sign in (1.0, -1.0):
      for p, u in zip(model.parameters(), us):
        p.add_(u, alpha=sign * 1e-2)
      losses.append(
        torch.nn.functional.cross_entropy(model(x), y, reduction="none")
      )
      for p, u in zip(model.parameters(), us):
        p.add_(u, alpha=-sign * 1e-2)
  d = (losses[0] - losses[1]) / 2e-2
  expected = float(torch.clamp(d, -CLIP, CLIP).sum() / BATCH)
  assert abs(g - expected) < 1e-4 * max(1.0, abs(expected))
  assert abs(expected) > 1e-4  # not vacuous


def test_torch_port_step_is_finite_and_moves():
  torch = pytest.importorskip("torch")
  torch_dpzero = pytest.importorskip("torch_dpzero")
  model, step, x, y = _torch_step(
    torch, torch_dpzero, learning_rate=LR, noise_multiplier=1.0
  )
  before = [p.detach().clone() for p in model.parameters()]
  g = step(x, y)
  assert np.isfinite(g) and g != 0.0
  moved = sum(
    float((a.detach() - b).abs().sum())
    for a, b in zip(model.parameters(), before)
  )
  assert all(torch.isfinite(p).all() for p in model.parameters())
  assert moved > 0
