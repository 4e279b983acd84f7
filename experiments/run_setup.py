"""From a config to an estimator and its privacy plan, before any data is read.

The run's secret (OS entropy, or the insecure test secret), the estimator
built from its registry declaration, the plan read from the initialized
state and calibrated (or a set noise multiplier), and the start-up check
that the loss is per-example.
"""

from __future__ import annotations

import inspect

import jax
import numpy as np
import optax

from experiments import hidden_state_run, preflight
from experiments.optimizers import learning_rate_of, make_optimizer
from zoprivacy import accounting
from zoprivacy.data import sampling
from zoprivacy.estimators import registry
from zoprivacy.first_order import per_example_check
from zoprivacy.privacy import find_plan, randomness
from zoprivacy.secret_noise import bind_noise_secret


def run_secret(config) -> bytes:
  """The run's secret: OS entropy, or the insecure test secret."""
  if config.get("insecure_test_noise"):
    if config.get("epsilon_budget") is not None and not config.get("test_run"):
      raise ValueError(
        "insecure_test_noise makes the noise reproducible from the seed, so "
        "the run is not private; it cannot be combined with epsilon_budget "
        "unless the run is marked test_run=True."
      )
    return randomness.insecure_test_secret(config.seed)
  return randomness.new_secret()


def build_estimator(config, noise_multiplier, dataset_size, *, spec=None):
  """The estimator named by ``config.estimator``, from its declaration
  (``spec``: the run's resolved declaration; looked up when omitted)."""
  spec = spec or registry.get(config.estimator)
  return spec.factory(
    **estimator_kwargs(config, noise_multiplier, dataset_size, spec=spec)
  )


def estimator_kwargs(
  config, noise_multiplier, dataset_size, *, spec=None
) -> dict:
  """The keyword arguments :func:`build_estimator` passes to the factory."""
  spec = spec or registry.get(config.estimator)
  if spec.takes_setting:  # the setting holds the hyperparameters
    kwargs = hidden_state_run.factory_kwargs(config, dataset_size, spec=spec)
  else:
    kwargs = dict(spec.defaults)
    kwargs.update(config.estimator_kwargs)
  accepted = inspect.signature(spec.factory).parameters
  preflight.check_kwarg_names(config.estimator, kwargs, accepted)
  kwargs["direction_key"] = config.seed
  if spec.private:
    kwargs["noise_multiplier"] = noise_multiplier
    if not spec.takes_setting:  # a setting fixes its batches
      kwargs.update(
        expected_batch_size=config.expected_batch_size,
        dataset_size=dataset_size,
      )
    if config.get("insecure_test_noise"):
      kwargs["insecure_test_noise_seed"] = config.seed
  if spec.exact_noise and "noise" not in kwargs:
    kwargs["noise"] = "exact" if config.get("exact_noise", True) else "float"
  if spec.needs_num_steps:
    kwargs.setdefault("num_steps", config.num_steps)
  if spec.needs_learning_rate:
    kwargs.setdefault("learning_rate", learning_rate_of(config, spec)[0])
  return kwargs


def noise_multiplier_of(config, spec, dataset_size, trainable):
  """``(sigma, how)``: the set multiplier, or the one calibrated on the
  plan's own epsilon for ``target_epsilon``. The plan template comes from
  the estimator object (no optimizer state is initialized for it)."""
  if not spec.private:
    return None, "non-private"
  if config.get("noise_multiplier") is not None:
    return float(config.noise_multiplier), "set by noise_multiplier"
  if config.get("target_epsilon") is not None:
    estimator = build_estimator(config, 1.0, dataset_size, spec=spec)
    template = getattr(estimator, "privacy_plan", None)
    if template is None:  # an estimator without the attribute: read its state
      template = find_plan(estimator.init(trainable))
    plan = accounting.calibrate_plan(
      template.replace(delta=config.delta),
      target_epsilon=config.target_epsilon,
      num_steps=config.num_steps,
    )
    how = f"calibrated for target epsilon {config.target_epsilon:g}"
    return plan.noise_multiplier, how
  if spec.takes_setting:
    return None, "set by the setting's noise_std"
  raise ValueError("Set target_epsilon or noise_multiplier for a private run.")


def resolve_tx(config, trainable, dataset_size, *, spec=None):
  """``(tx, plan, how)``: the optimizer and the plan its state will hold,
  without initializing any state; ``how`` says where the multiplier came
  from."""
  spec = spec or registry.get(config.estimator)
  sigma, how = noise_multiplier_of(config, spec, dataset_size, trainable)
  estimator = build_estimator(config, sigma, dataset_size, spec=spec)
  tx = (
    estimator  # a setting's update holds its step size and projection
    if spec.takes_setting
    else optax.chain(estimator, make_optimizer(config))
  )
  plan = getattr(estimator, "privacy_plan", None)
  return tx, plan, how


def init_optimizer_state(init, trainable, secret: bytes):
  """THE place where a run's optimizer state is created: ``init`` (the
  chain's, or the layer-wise step's) on the trainable parameters, for the
  run whose secret is ``secret``. Anything that binds the secret to the
  state's noise belongs here, and only here."""
  # Every noise key from the broadcast run secret: all hosts add the same
  # noise, bound to the plan (zoprivacy.secret_noise.noise_binding).
  return bind_noise_secret(init(trainable), secret)


def resolve_plan(config, trainable, dataset_size, *, spec=None):
  """The optimizer and its state, with the plan they hold.

  The plan is read from the initialized state; calibration searches the
  noise multiplier on that plan's own epsilon. Returns ``(tx, opt_state,
  plan, how)`` where ``how`` says where the multiplier came from.
  """
  tx, _, how = resolve_tx(config, trainable, dataset_size, spec=spec)
  opt_state = tx.init(trainable)
  plan = find_plan(opt_state)
  if plan.is_noised:
    plan = plan.replace(delta=config.delta)
  return tx, opt_state, plan, how


def check_loss_is_per_example(
  task, trainable, frozen, capacity: int, seed: int
):
  """Step 3: the per-example contract, on synthetic inputs shaped like the
  training batch (never on private data)."""
  shape_source = sampling.gather(
    (task.train_inputs, task.train_labels),
    np.arange(min(capacity, task.num_train)),
  )
  batch = per_example_check.synthetic_batch_like(
    shape_source, jax.random.key(seed)
  )
  per_example_check.assert_per_example(
    lambda p, b: task.batched_loss(p, frozen, b), trainable, batch
  )
