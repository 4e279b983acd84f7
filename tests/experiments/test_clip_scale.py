"""The clipping-scale tool measures finite differences on public data only."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import default
from experiments import clip_scale, tasks
from zoprivacy.zo import directions

D, N_PUBLIC = 5, 64


def _task(with_public=True):
  """Logistic regression; the private inputs are 1000x larger than the
  public ones, so a difference computed on a private example would be
  about 1000x larger than any public one."""
  rng = np.random.default_rng(1)
  x_private = 1000.0 * rng.normal(size=(40, D)).astype(np.float32)
  x_public = rng.normal(size=(N_PUBLIC, D)).astype(np.float32)
  labels = rng.integers(0, 2, N_PUBLIC).astype(np.int32)
  return tasks.Task(
    x_private,
    np.zeros(40, np.int32),
    x_private[:4],
    np.zeros(4, np.int32),
    2,
    lambda key: ({"w": jax.random.normal(key, (D, 2)), "b": jnp.zeros(2)}, {}),
    lambda t, f, x: x @ t["w"] + t["b"],
    public_inputs=x_public if with_public else None,
    public_labels=labels if with_public else None,
  )


def _config():
  c = default.get_config()
  c.seed = 3
  c.estimator_kwargs.smoothing = 1e-3
  c.estimator_kwargs.directions = "gaussian"
  return c


def test_differences_are_directional_derivatives_on_public_examples():
  task, config = _task(), _config()
  got = clip_scale.finite_differences(task, config, 2, 16)
  assert got.shape == (32,)
  # Independently: |d/dt L_i(x + t u)| at t = 0 by forward-mode autodiff,
  # with the documented draws (batches of a seeded permutation of the
  # public examples, one direction per batch from keys split off the seed).
  trainable, frozen = task.init(jax.random.key(config.seed))
  order = np.random.default_rng(config.seed).permutation(N_PUBLIC)
  keys = jax.random.split(jax.random.key(config.seed), 2)
  want = []
  for b in range(2):
    idx = order[b * 16 : (b + 1) * 16]
    u = directions.gaussian(keys[b], trainable)
    batch = (task.public_inputs[idx], task.public_labels[idx])
    _, tangent = jax.jvp(
      lambda p, batch=batch: task.batched_loss(p, frozen, batch),
      (trainable,),
      (u,),
    )
    want.append(np.abs(np.asarray(tangent)))
  want = np.concatenate(want)
  np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-3)
  # Public inputs are N(0, 1) in 5 dimensions: no difference comes near the
  # scale of a private example.
  assert got.max() < 50.0


def test_summary_quantiles():
  s = clip_scale.summary(np.arange(101, dtype=np.float64))
  assert s == {
    "count": 101,
    "mean": 50.0,
    "q50": 50.0,
    "q75": 75.0,
    "q90": 90.0,
    "q99": 99.0,
  }


def test_refuses_without_enough_public_data():
  with pytest.raises(ValueError, match="no public data"):
    clip_scale.finite_differences(_task(with_public=False), _config(), 1, 8)
  with pytest.raises(ValueError, match="need 96 public examples"):
    clip_scale.finite_differences(_task(), _config(), 3, 32)
