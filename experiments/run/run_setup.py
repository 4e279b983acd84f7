"""From a run's settings to an estimator and its privacy plan.

The run's secret (OS entropy, or the insecure test secret), the estimator
built from its registry declaration, the plan read from the initialized
state and calibrated (or a set noise multiplier), and the start-up check
that the loss is per-example.
"""

from __future__ import annotations

import inspect
from typing import Any, NamedTuple

import jax
import numpy as np
import optax

from experiments.run import hidden_state_run, preflight, progress
from experiments.run.optimizers import make_optimizer
from experiments.run.settings import Settings, thaw
from zoprivacy.data import sampling
from zoprivacy.estimators import composition
from zoprivacy.first_order import per_example_check
from zoprivacy.hidden_state.privacy import with_plan_multiplier
from zoprivacy.privacy import find_plan, randomness
from zoprivacy.secret_noise import bind_noise_secret


def run_secret(settings: Settings) -> bytes:
  """The run's secret: OS entropy, or the insecure test secret."""
  if settings.insecure_test_noise:
    if settings.privacy.epsilon_budget is not None and not settings.test_run:
      raise ValueError(
        "insecure_test_noise makes the noise reproducible from the seed, so "
        "the run is not private; it cannot be combined with epsilon_budget "
        "unless the run is marked test_run=True."
      )
    return randomness.insecure_test_secret(settings.seed)
  return randomness.new_secret()


class Resolved(NamedTuple):
  """The optimizer of a run, built once: ``tx`` (the estimator chained with
  the optimizer, or a setting's estimator alone), the ``estimator``, the
  factory's keyword arguments and where the noise multiplier came from."""

  tx: optax.GradientTransformation
  estimator: Any
  kwargs: dict
  how: str

  @property
  def plan(self):
    """The estimator's plan (before any state; ``delta`` not yet set)."""
    return getattr(self.estimator, "privacy_plan", None)


def build_estimator(settings: Settings, noise_multiplier, *, spec):
  """The estimator named by ``settings.estimator`` (bound to the dataset
  size), from its declaration ``spec`` (the run's, from
  :func:`experiments.run.resolution.resolve`), at ``noise_multiplier``."""
  kwargs = estimator_kwargs(settings, spec=spec)
  return spec.factory(**_with_multiplier(kwargs, spec, noise_multiplier))


def estimator_kwargs(settings: Settings, *, spec) -> dict:
  """The keyword arguments :func:`resolve` passes to the factory: its
  registered defaults, ``estimator_kwargs`` and, for a private estimator,
  the run's privacy value (:attr:`experiments.run.settings.RunPrivacy.
  value`, uncalibrated when the config sets a target). ``settings``: bound
  to the dataset size (:meth:`~experiments.run.settings.Settings.
  for_dataset`)."""
  if spec.takes_setting:  # the setting holds the hyperparameters
    kwargs = hidden_state_run.factory_kwargs(settings, spec=spec)
  else:
    kwargs = dict(spec.defaults)
    kwargs.update(thaw(settings.estimator_kwargs))
  accepted = inspect.signature(spec.factory).parameters
  preflight.check_kwarg_names(settings.estimator, kwargs, accepted)
  kwargs["direction_key"] = settings.seed
  if spec.private and not spec.takes_setting:
    kwargs["privacy"] = settings.privacy.value
  if settings.physical_batch_size is not None:
    if "physical_batch_size" not in accepted:
      raise ValueError(
        f"{settings.estimator} takes no physical_batch_size (its factory "
        "does not evaluate a batch in physical chunks); unset "
        "config.physical_batch_size."
      )
    kwargs["physical_batch_size"] = settings.physical_batch_size
  if spec.needs_num_steps:
    kwargs.setdefault("num_steps", settings.num_steps)
  if spec.needs_learning_rate:
    kwargs.setdefault("learning_rate", settings.learning_rate)
  return kwargs


def _with_multiplier(kwargs, spec, sigma) -> dict:
  """``kwargs`` whose privacy value (or, for a setting, whose
  plan's multiplier) is ``sigma``."""
  if not spec.private:
    return kwargs
  if spec.takes_setting:
    setting = with_plan_multiplier(kwargs["setting"], sigma)
    return dict(kwargs, setting=setting)
  privacy = kwargs["privacy"].replace(noise_multiplier=sigma, target=None)
  return dict(kwargs, privacy=privacy)


def calibrated(settings: Settings, spec, kwargs) -> tuple[dict, str]:
  """``(kwargs, how)``: the factory's arguments with the noise multiplier
  set or calibrated (the library's calibration, :func:`zoprivacy.privacy.
  calibrate`: the privacy value's on the estimator's plan; a setting is
  built from the calibrated value, :func:`experiments.run.hidden_state_run.
  make_setting`), and where it came from. Nothing else is built."""
  if not spec.private:
    return kwargs, "non-private"
  if spec.takes_setting:  # its setting holds the value's noise, calibrated
    return kwargs, hidden_state_run.noise_source(settings)
  privacy = settings.privacy
  if privacy.base.noise_multiplier is not None:
    return kwargs, "set by noise_multiplier"
  if privacy.target is None:
    raise ValueError(
      "Set privacy.target_epsilon or privacy.noise_multiplier for a private "
      "run."
    )
  epsilon = privacy.target.epsilon
  how = f"calibrated for target epsilon {epsilon:g}"
  progress.stage(f"calibrating the noise for epsilon {epsilon:g}")
  rest = {k: v for k, v in kwargs.items() if k != "privacy"}
  value = kwargs["privacy"].calibrate(estimator=spec.factory, **rest)
  return dict(kwargs, privacy=value), how


def resolve(settings: Settings, *, spec) -> Resolved:
  """THE resolution of a run's optimizer (the runner's :func:`setup`, tuning
  and the reproductions all call it): the factory's arguments computed once,
  the noise multiplier set or calibrated, the estimator and the optimizer
  built once each; no state is initialized. ``settings``: bound to the
  dataset size (:meth:`~experiments.run.settings.Settings.for_dataset`,
  which counts a run in epochs in steps)."""
  kwargs, how = calibrated(
    settings, spec, estimator_kwargs(settings, spec=spec)
  )
  progress.stage("building the model and the optimizer")
  estimator = spec.factory(**kwargs)
  tx = (
    estimator  # a setting's update holds its step size and projection
    if spec.takes_setting
    else optax.chain(estimator, make_optimizer(settings))
  )
  return Resolved(tx, estimator, kwargs, how)


def held_plan(opt_state, settings: Settings):
  """The plan ``opt_state`` holds, with the run's ``delta`` when noised."""
  plan = find_plan(opt_state)
  return plan.replace(delta=settings.privacy.delta) if plan.is_noised else plan


def init_optimizer_state(init, trainable, secret: bytes):
  """THE place where a run's optimizer state is created: ``init`` (the
  chain's, or the layer-wise step's) on the trainable parameters, for the
  run whose secret is ``secret``. Anything that binds the secret to the
  state's noise belongs here, and only here."""
  # Every noise key from the broadcast run secret: all hosts add the same
  # noise, bound to the plan (zoprivacy.secret_noise.noise_binding).
  # Checked whole before any release (zoprivacy.init's check), and marked.
  return bind_noise_secret(composition.check(init(trainable)), secret)


def state_template(settings: Settings, spec, task):
  """``(trainable, frozen, opt_state, plan)`` of the run of ``settings``
  and ``spec`` (:func:`experiments.run.resolution.resolve`'s), resolved as
  :func:`experiments.run.resolved_run.setup` resolves it (:func:`resolve`
  on ``task``'s training set), at the initial parameters: the template a
  tool restores a run's checkpoint into, and the plan the run's state will
  hold. Its noise keys are bound (:func:`init_optimizer_state`), as in the
  run's checkpoints, to a fresh secret that nothing keeps. Reads no private
  data."""
  settings = settings.for_dataset(task.num_train)
  tx = resolve(settings, spec=spec).tx
  trainable, frozen = task.init(jax.random.key(settings.seed))
  opt_state = init_optimizer_state(tx.init, trainable, randomness.new_secret())
  return trainable, frozen, opt_state, held_plan(opt_state, settings)


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
