"""docs/extending.md: its example estimator registers, trains and accounts."""

import functools
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from zoprivacy.estimators import registry
from zoprivacy.privacy import find_plan


def _example_code() -> str:
  with open("docs/extending.md") as f:
    text = f.read()
  return re.findall(r"```python\n(.*?)```", text, re.S)[0]


@functools.cache
def _registered_example():
  """Runs the example once (a name registers once per process)."""
  namespace = {}
  exec(compile(_example_code(), "docs/extending.md", "exec"), namespace)  # pylint: disable=exec-used
  return registry.get("one_point")


@pytest.mark.filterwarnings(
  "ignore::zoprivacy.privacy.InsecureTestNoiseWarning"
)
@pytest.mark.parametrize("noise", [None, "float"])
def test_extending_example_registers_and_trains(noise):
  """The default (exact discrete noise) and the floating-point opt-in."""
  spec = _registered_example()
  assert spec.private and spec.public_data is None and spec.exact_noise
  noise_kw = {} if noise is None else dict(noise=noise)

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
      **noise_kw,
    )
  tx = optax.chain(est, optax.sgd(2e-3))
  w = jnp.zeros(4)
  state = tx.init(w)
  plan = find_plan(state)
  exact = noise is None
  assert plan.mechanism.name == ("discrete_gaussian" if exact else "gaussian")
  assert not plan.is_private  # the test's insecure noise seed
  if exact:
    assert plan.integer_noise_scale == 0.5 * 1024

  @jax.jit
  def step(w, state):
    u, state = tx.update(
      jnp.zeros_like(w), state, w, batched_loss=loss, batch=(x, y)
    )
    return optax.apply_updates(w, u), state

  start = float(jnp.mean(loss(w, (x, y))))
  scalars = []
  for _ in range(500):
    w, state = step(w, state)
    scalars.append(state[0].released)
  if exact:  # every release is an integer number of grid steps C / (m B)
    units = np.concatenate(scalars) * 256 * 1024 / 50.0
    np.testing.assert_allclose(units, np.round(units), rtol=1e-6, atol=1e-3)
  assert float(jnp.mean(loss(w, (x, y)))) < 0.7 * start
  assert 0 < plan.epsilon(500, 1e-5) < np.inf
