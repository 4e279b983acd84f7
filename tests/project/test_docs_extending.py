"""docs/extending.md: its example estimator registers, trains and accounts."""

import functools
import math
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


@functools.cache
def _registered_toy_mechanism():
  """Runs the page's mechanism example once (it registers two names)."""
  with open("docs/extending.md") as f:
    code = re.findall(r"```python\n(.*?)```", f.read(), re.S)[-1]
  exec(compile(code, "docs/extending.md", "exec"), {})  # pylint: disable=exec-used
  return registry.get("toy_one_point")


@pytest.mark.slow  # ~20 s: trains a small CNN in the runner
@pytest.mark.filterwarnings(
  "ignore::zoprivacy.privacy.InsecureTestNoiseWarning"
)
def test_the_toy_mechanism_trains_in_the_runner_with_a_correct_epsilon(
  tmp_path,
):
  from configs import default  # pylint: disable=g-import-not-at-top
  from experiments import train  # pylint: disable=g-import-not-at-top
  from zoprivacy.accounting import discrete_pld  # pylint: disable=g-import-not-at-top

  _registered_toy_mechanism()
  config = default.get_config()
  config.estimator = "toy_one_point"
  config.estimator_kwargs = {"clip": 1.0, "smoothing": 1e-2}
  config.num_steps = 30
  config.eval_every = 0
  config.checkpoint_every = 0
  config.workdir = str(tmp_path)
  result = train.train(config, progress=False)
  plan = result["privacy_plan"]
  assert plan["mechanism"] == "toy_geometric"
  assert "toy geometric noise" in result["privacy"]
  sigma = result["noise_multiplier"]
  p = plan["expected_batch_size"] / plan["dataset_size"]
  direct = discrete_pld.discrete_noise_pld(
    scale=sigma * 64, sensitivity=64, sampling_probability=p, num_steps=30
  ).get_epsilon_for_delta(config.delta)
  assert result["epsilon"] == pytest.approx(direct, rel=1e-9)
  assert result["epsilon"] <= config.target_epsilon
  assert math.isfinite(result["test_accuracy"])
