"""Resolve once, then run: setup's order, the registry consulted once, and
step wrappers refused (every function of experiments/ is at most 60 lines:
tests/project/test_function_length.py)."""

import dataclasses
import importlib

import config_overrides
import jax
import jax.numpy as jnp
import optax
import pytest

import zoprivacy
from configs import default
from experiments import tasks
from experiments.run import (
  config_numbers,
  preflight,
  resolution,
  resolved_run,
  train,
)
from zoprivacy.estimators import registry
from zoprivacy.estimators.composition import UncheckedCompositionError
from zoprivacy.privacy.wrappers import SkippingWrapperError


def _config(**overrides):
  c = default.get_config()
  c.num_steps, c.eval_every, c.checkpoint_every = 6, 3, 3
  c.privacy.target_epsilon, c.privacy.noise_multiplier = None, 2.0
  return config_overrides.apply(c, overrides)


@pytest.mark.slow  # six short trainings, 30-50 s on 2 cores
@pytest.mark.parametrize(
  "name", ["default", "mezo", "hidden_state_digits_logreg"]
)
def test_the_registry_is_consulted_once_per_run(tmp_path, monkeypatch, name):
  calls = []
  real = registry.get

  def counting(estimator):
    calls.append(estimator)
    return real(estimator)

  monkeypatch.setattr(registry, "get", counting)
  c = importlib.import_module(f"configs.{name}").get_config()
  c.num_steps, c.eval_every, c.checkpoint_every = 6, 3, 3
  if c.privacy.get("target_epsilon") is not None:  # no calibration
    c.privacy.target_epsilon, c.privacy.noise_multiplier = None, 2.0
  c.workdir = str(tmp_path)
  train.train(c, progress=False, stop_after=3)
  train.train(c, progress=False)  # resumed: set up again, once
  assert calls == [c.estimator, c.estimator], calls


@pytest.mark.parametrize(
  "field,value,needle",
  [
    ("target_epsilon", -1.0, "target_epsilon must be"),
    ("delta", 1.0, "delta must lie"),
    ("num_steps", 10**12, "bounded time"),
    ("expected_batch_size", 0, "expected_batch_size must be"),
    ("optimizer", "MultiSteps", "larger expected_batch_size"),
    ("estimator", "dpzer0", "(?i)did you mean 'dpzero'"),
  ],
)
def test_checks_that_need_no_data_run_before_any_data(
  monkeypatch, field, value, needle
):
  def no_data(config):
    raise AssertionError("data loaded before the config was checked")

  monkeypatch.setattr(tasks, "get_task", no_data)
  with pytest.raises((ValueError, KeyError), match=needle):
    resolved_run.setup(*resolution.resolve(_config(**{field: value})))


def test_clip_and_smoothing_are_checked_before_any_data(monkeypatch):
  monkeypatch.setattr(tasks, "get_task", lambda c: 1 / 0)
  c = _config()
  c.privacy.clip = 0.0
  with pytest.raises(
    ValueError, match="privacy.clip must be a finite number > 0"
  ):
    resolved_run.setup(*resolution.resolve(c))
  c = _config()
  c.estimator_kwargs.smoothing = -1e-3
  with pytest.raises(ValueError, match="smoothing must be > 0"):
    resolved_run.setup(*resolution.resolve(c))


def test_a_batch_larger_than_the_data_is_refused_before_the_model(
  monkeypatch,
):
  task = tasks.get_task(_config())

  def no_model(key):
    raise AssertionError("the model was built before the batch was checked")

  monkeypatch.setattr(task, "init", no_model)
  with pytest.raises(ValueError, match="larger than the 1431"):
    resolved_run.setup(
      *resolution.resolve(_config(expected_batch_size=5000)), task=task
    )


def test_the_run_is_frozen_and_inspectable():
  run = resolved_run.setup(
    *resolution.resolve(_config(check_per_example=False))
  )
  assert run.spec.name == "dpzero" and run.plan.is_noised
  assert run.restored_step == 0 and run.workdir is None
  text = repr(run)
  assert "dpzero" in text and len(text) < 5000  # no arrays in the repr
  with pytest.raises(dataclasses.FrozenInstanceError):
    run.plan = None  # type: ignore[misc]


def test_multisteps_around_an_estimator_is_refused_with_the_supported_way():
  """``optax.MultiSteps`` would run the estimator on one call in k with that
  call's batch alone; the runner refuses it by name and says what to use."""
  assert hasattr(optax, "MultiSteps") and hasattr(optax, "apply_every")
  for name in config_numbers.STEP_WRAPPERS:
    with pytest.raises(ValueError, match="larger expected_batch_size"):
      preflight.validate(_config(optimizer=name))
  with pytest.raises(ValueError, match="takes no learning rate"):
    preflight.validate(_config(optimizer="apply_every"))


@pytest.mark.slow  # eight eager updates: about 6 s on 2 cores under load
def test_multisteps_in_library_code_is_refused_before_the_first_release():
  """What docs/experiments.md says of the refusal: around an estimator's
  chain, ``optax.MultiSteps(tx, k)`` would run the estimator on every call
  but keep its state on one call in k. The library refuses it when the
  state is made (``zoprivacy.init``), and a state made by ``tx.init`` alone
  releases nothing: its first update is refused."""
  est = zoprivacy.dpzero(
    zoprivacy.Privacy(
      noise_multiplier=1.0,
      sampling=zoprivacy.Poisson(dataset_size=16, expected_batch_size=4),
      assume_sampling=True,
    ),
    smoothing=1e-3,
  )
  tx = optax.MultiSteps(optax.chain(est, optax.sgd(0.1)), every_k_schedule=4)
  params = {"w": jnp.ones(3)}
  with pytest.raises(SkippingWrapperError, match="MultiSteps"):
    zoprivacy.init(tx, params)
  loss = lambda p, batch: jnp.sum((batch - p["w"]) ** 2, axis=-1)
  with pytest.raises(UncheckedCompositionError, match="zoprivacy.init"):
    tx.update(
      jax.tree.map(jnp.zeros_like, params),
      tx.init(params),
      params,
      batched_loss=loss,
      batch=jnp.zeros((4, 3)),
      mask=jnp.ones(4, bool),
    )
