"""docs/extending.md: its example estimator registers, trains and accounts."""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax

from zoprivacy.estimators import registry
from zoprivacy.privacy import find_plan


def _example_code() -> str:
  with open("docs/extending.md") as f:
    text = f.read()
  return re.findall(r"```python\n(.*?)```", text, re.S)[0]


def test_extending_example_registers_and_trains():
  namespace = {}
  exec(compile(_example_code(), "docs/extending.md", "exec"), namespace)  # pylint: disable=exec-used
  spec = registry.get("one_point")
  assert spec.private and spec.public_data is None

  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(256, 4)), jnp.float32)
  w_true = jnp.asarray([1.0, -2.0, 0.5, 3.0])
  y = x @ w_true
  loss = lambda w, b: (b[0] @ w - b[1]) ** 2
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    est = spec.factory(
      clip=50.0,
      noise_multiplier=0.5,
      smoothing=0.5,
      expected_batch_size=256,
      dataset_size=256,
      insecure_test_noise_seed=0,
    )
  tx = optax.chain(est, optax.sgd(2e-3))
  w = jnp.zeros(4)
  state = tx.init(w)
  plan = find_plan(state)
  assert plan.mechanism == "gaussian" and not plan.is_private

  @jax.jit
  def step(w, state):
    u, state = tx.update(
      jnp.zeros_like(w), state, w, batched_loss=loss, batch=(x, y)
    )
    return optax.apply_updates(w, u), state

  start = float(jnp.mean(loss(w, (x, y))))
  for _ in range(500):
    w, state = step(w, state)
  assert float(jnp.mean(loss(w, (x, y)))) < 0.7 * start
  assert 0 < plan.epsilon(500, 1e-5) < np.inf
