"""A run is resolved once: validation builds nothing, and setup builds the
estimator and the optimizer once each (a calibrated run too: calibration
reads the plan from the factory's registered privatization, no probe
estimator). Counted by wrapping the
registered factory, the optax optimizer, the layer-wise step and the factory
arguments."""

import dataclasses
import functools

import ml_collections
import optax
import pytest

from configs import default, tiny_opt_sst2
from experiments import tasks
from experiments.run import (
  layerwise_run,
  preflight,
  resolution,
  resolved_run,
  run_setup,
  train,
)
from experiments.tuning import trials
from zoprivacy.estimators import registry


@pytest.fixture
def counts(monkeypatch):
  """``{'factory': [noise multipliers], 'sgd': n, 'kwargs': n, 'layerwise':
  n}``, counted while the test runs."""
  seen = {"factory": [], "sgd": 0, "kwargs": 0, "layerwise": 0}

  def counting(fn, record):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
      record(kwargs)
      return fn(*args, **kwargs)

    return wrapper

  def bump(key):
    return lambda kwargs: seen.__setitem__(key, seen[key] + 1)

  for name in ("dpzero", "dp_zo", "dp_sgd", "pazo_m"):
    spec = registry._REGISTRY[name]  # pylint: disable=protected-access
    factory = counting(
      spec.factory,
      lambda kw: seen["factory"].append(kw["privacy"].noise_multiplier),
    )
    monkeypatch.setitem(
      registry._REGISTRY,  # pylint: disable=protected-access
      name,
      dataclasses.replace(spec, factory=factory),
    )
  monkeypatch.setattr(optax, "sgd", counting(optax.sgd, bump("sgd")))
  monkeypatch.setattr(
    run_setup,
    "estimator_kwargs",
    counting(run_setup.estimator_kwargs, bump("kwargs")),
  )
  monkeypatch.setitem(
    layerwise_run.STEPS,
    "dp_zo",
    counting(layerwise_run.STEPS["dp_zo"], bump("layerwise")),
  )
  return seen


def test_validation_builds_nothing(counts):
  c = default.get_config()
  assert preflight.validate(c).name == "dpzero"
  assert counts == {"factory": [], "sgd": 0, "kwargs": 0, "layerwise": 0}


def test_a_calibrated_default_run_builds_once(counts):
  c = default.get_config()
  c.num_steps = 30
  c.insecure_test_noise = True
  run = resolved_run.setup(*resolution.resolve(c))
  assert run.how.startswith("calibrated")
  assert counts["factory"] == [run.plan.noise_multiplier]  # no probe
  assert run.plan.epsilon(c.num_steps) <= c.privacy.target_epsilon
  assert (counts["sgd"], counts["kwargs"], counts["layerwise"]) == (1, 1, 0)


@pytest.mark.parametrize("estimator", ["dp_sgd", "pazo_m"])
def test_a_calibrated_run_of_another_estimator_builds_once(counts, estimator):
  c = default.get_config()
  c.num_steps, c.insecure_test_noise = 30, True
  c.estimator, c.check_per_example = estimator, False
  c.estimator_kwargs = ml_collections.ConfigDict()  # the factory's defaults
  if registry.get(estimator).public_data:  # a public split of the task
    c.public = "stratified4"
  run = resolved_run.setup(*resolution.resolve(c))
  assert counts["factory"] == [run.plan.noise_multiplier]
  assert run.plan.epsilon(c.num_steps) <= c.privacy.target_epsilon


def test_a_run_with_a_set_multiplier_builds_once(counts):
  c = default.get_config()
  c.num_steps, c.privacy.target_epsilon, c.privacy.noise_multiplier = (
    30,
    None,
    2.0,
  )
  resolved_run.setup(*resolution.resolve(c))
  assert counts["factory"] == [2.0]
  assert (counts["sgd"], counts["kwargs"]) == (1, 1)


def test_a_layerwise_run_builds_the_generic_estimator_once(counts):
  c = tiny_opt_sst2.get_config()
  assert c.layerwise and c.estimator == "dp_zo"
  c.num_steps, c.num_train, c.num_eval = 4, 64, 32
  c.privacy.target_epsilon, c.privacy.noise_multiplier = None, 1.0
  c.check_per_example = False
  run = resolved_run.setup(*resolution.resolve(c))
  assert run.plan.noise_multiplier == 1.0
  assert counts["factory"] == [1.0]  # its plan checks the layer-wise step's
  assert (counts["sgd"], counts["kwargs"], counts["layerwise"]) == (1, 1, 1)


def test_a_tuning_trial_is_resolved_by_its_run_alone(counts, tmp_path):
  """A trial's plan is checked on the run's own resolution (no second
  resolver), and the template a trial is restored into resolves as setup
  does."""
  c = default.get_config()
  c.num_steps, c.eval_every, c.checkpoint_every = 2, 0, 0
  c.insecure_test_noise = True
  base = trials.trial_base(c)
  plan = trials.trial_plan(base, tasks.get_task(base))
  assert counts["factory"] == [1.0] and counts["sgd"] == 1
  trial = trials.with_fields(base, {"workdir": str(tmp_path)})
  checked = []
  train.train(
    trial, progress=False, check_run=lambda run: checked.append(run.plan)
  )
  assert checked == [plan]
  assert counts["factory"] == [1.0, 1.0] and counts["sgd"] == 2


def test_bad_optimizer_arguments_are_refused_before_anything_is_built(counts):
  """The refusals make_optimizer gave when validation built it, from the
  signatures alone."""
  c = default.get_config()
  c.optimizer, c.optimizer_kwargs = "sgd", {"nesterovv": True}
  with pytest.raises(TypeError, match=r"sgd\(\) got an unexpected keyword"):
    preflight.validate(c)
  c = default.get_config()
  c.schedule = "warmup_cosine_decay_schedule"
  with pytest.raises(TypeError, match="missing a required argument"):
    preflight.validate(c)
  assert counts == {"factory": [], "sgd": 0, "kwargs": 0, "layerwise": 0}
