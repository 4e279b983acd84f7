"""docs/extending.md: its example estimator registers, trains and accounts;
its example mechanism, one module and one registration line, is planned,
accounted, calibrated and trained with by name."""

import functools
import math
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoprivacy
from configs import default
from experiments.run import train
from zoprivacy.accounting import discrete_pld
from zoprivacy.estimators import registry
from zoprivacy.mechanisms import registry as mechanism_registry
from zoprivacy.mechanisms import registry as mechanisms
from zoprivacy.privacy import (
  calibrate_noise_multiplier,
  find_plan,
  privatization,
)


@pytest.fixture(autouse=True, scope="module")
def _examples_registered_for_this_module_only():
  """The page's examples register 'one_point' and 'toy_geometric' in this
  process; after the module they are removed, so tests that read the
  built-in registries (the manifest's) see them whatever the order."""
  yield
  registry._REGISTRY.pop("one_point", None)  # pylint: disable=protected-access
  mechanism_registry.MECHANISMS.pop("toy_geometric", None)
  _registered_example.cache_clear()


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
  assert spec.private and spec.public_data is None
  kind = zoprivacy.Exact() if noise is None else zoprivacy.Float()

  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(256, 4)), jnp.float32)
  w_true = jnp.asarray([1.0, -2.0, 0.5, 3.0])
  y = x @ w_true
  loss = lambda w, b: (b[0] @ w - b[1]) ** 2
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    privacy = zoprivacy.Privacy(
      clip=50.0,
      noise=zoprivacy.TestNoise(0, of=kind),
      noise_multiplier=0.5,
      sampling=zoprivacy.Poisson(dataset_size=256, expected_batch_size=256),
      assume_sampling=True,  # the whole data set, given as one batch
    )
    est = spec.factory(privacy, smoothing=0.5)
  tx = optax.chain(est, optax.sgd(2e-3))
  w = jnp.zeros(4)
  state = zoprivacy.init(tx, w)
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
def _toy_mechanism_module() -> dict:
  """Runs the page's mechanism example once (a name registers once per
  process): its namespace."""
  with open("docs/extending.md") as f:
    code = re.findall(r"```python\n(.*?)```", f.read(), re.S)[-1]
  namespace = {}
  exec(compile(code, "docs/extending.md", "exec"), namespace)  # pylint: disable=exec-used
  return namespace


def _discrete_laplace_epsilon(multiplier, steps, p=64 / 1797):

  pld = discrete_pld.discrete_noise_pld(
    scale=multiplier * 64,
    sensitivity=64,
    sampling_probability=p,
    num_steps=steps,
  )
  return pld.get_epsilon_for_delta(1e-5)


def test_the_toy_mechanism_is_one_module_and_one_registration_line():
  """Defined and registered by the page's module alone: selected by name
  in a plan and by an estimator, accounted and calibrated as the discrete
  Laplace it inherits from."""

  ns = _toy_mechanism_module()
  assert mechanisms.get("toy_geometric") is ns["ToyGeometric"]
  assert "toy_geometric" in mechanisms.selectable()
  plan = ns["plan"]
  assert plan.mechanism == ns["ToyGeometric"](2.0, 1, 64)
  assert "toy geometric noise" in plan.describe()
  assert ns["epsilon"] == pytest.approx(
    _discrete_laplace_epsilon(2.0, 100), rel=1e-12
  )
  calibrated = ns["calibrated"]
  sigma = calibrated.noise_multiplier
  assert calibrated.epsilon(100) == pytest.approx(
    _discrete_laplace_epsilon(sigma, 100), rel=1e-12
  )
  assert (
    calibrated.epsilon(100)
    <= 2.0
    < _discrete_laplace_epsilon(sigma / 1.01, 100)
  )
  # Its calibration is the continuous Laplace's search, then its own plan.
  laplace = calibrate_noise_multiplier(
    target_epsilon=2.0,
    delta=1e-5,
    sampling_probability=64 / 1797,
    num_steps=100,
    mechanism="laplace",
  )
  assert laplace.noise_multiplier <= sigma <= laplace.noise_multiplier * 1.02
  value = zoprivacy.Privacy(
    noise_multiplier=1.0,
    sampling=zoprivacy.Poisson(dataset_size=64, expected_batch_size=8),
  )
  with pytest.raises(ValueError, match=r"noise=zoprivacy\.Float\(\)"):
    privatization.privatize(value.replace(mechanism="toy_geometric"))
  with pytest.raises(ValueError, match="mechanism must be one of"):
    privatization.privatize(  # an accounting value only
      value.replace(mechanism="discrete_laplace")
    )


def test_dp_zo_trains_with_the_toy_noise():
  ns = _toy_mechanism_module()
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(64, 4)), jnp.float32)
  y = x @ jnp.asarray([1.0, -2.0, 0.5, 3.0])
  loss = lambda w, b: (b[0] @ w - b[1]) ** 2
  tx = optax.chain(ns["estimator"], optax.sgd(1e-3))
  w = jnp.zeros(4)
  state = zoprivacy.init(tx, w)
  plan = find_plan(state)
  assert plan.mechanism.name == "toy_geometric" and plan.is_private
  assert plan.noise_multiplier == ns["calibrated"].noise_multiplier

  @jax.jit
  def step(w, state):
    u, state = tx.update(
      jnp.zeros_like(w), state, w, batched_loss=loss, batch=(x, y)
    )
    return optax.apply_updates(w, u), state

  for _ in range(3):
    w, state = step(w, state)
  assert bool(jnp.all(jnp.isfinite(w))) and int(state[0].step) == 3


@pytest.mark.slow  # ~20 s: trains a small CNN in the runner
def test_the_toy_mechanism_trains_in_the_runner_with_a_correct_epsilon(
  tmp_path,
):

  _toy_mechanism_module()
  config = default.get_config()
  config.estimator = "dp_zo"
  config.estimator_kwargs = {}
  config.privacy.clip = None  # dp_zo's own
  config.privacy.mechanism = "toy_geometric"
  config.privacy.noise = "float"
  config.num_steps = 30
  config.eval_every = 0
  config.checkpoint_every = 0
  config.workdir = str(tmp_path)
  result = train.train(config, progress=False)
  plan = result["privacy_plan"]
  assert plan["mechanism"] == "toy_geometric"
  assert "toy geometric noise" in result["privacy"]
  p = plan["expected_batch_size"] / plan["dataset_size"]
  direct = _discrete_laplace_epsilon(result["noise_multiplier"], 30, p)
  assert result["epsilon"] == pytest.approx(direct, rel=1e-9)
  assert result["epsilon"] <= config.privacy.target_epsilon
  assert math.isfinite(result["test_accuracy"])
