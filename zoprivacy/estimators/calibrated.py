"""One call from a target epsilon to a private estimator and its plan.

::

    est, plan = zoprivacy.private(
        zoprivacy.dpzero,
        target_epsilon=2.0, delta=1e-5, num_steps=4000,
        expected_batch_size=64, dataset_size=1437,
        clip=1.0, smoothing=1e-3,
    )
    tx = optax.chain(est, optax.sgd(0.02))
    assert zoprivacy.find_plan(tx.init(params)) == plan

The noise multiplier is calibrated on the estimator's own plan
(:func:`zoprivacy.accounting.calibrate_plan`, the search the runner uses:
the plan's own PLD epsilon after ``num_steps`` steps is at most the
target), and the estimator is built with it, once: the plan to calibrate
comes from the factory's registered privatization of these arguments, not
from a probe estimator. Its state holds the calibrated
plan with ``delta`` set, so ``zoprivacy.epsilon(state)`` needs no delta and
``plan.epsilon(num_steps)`` is the epsilon of the whole run.

The sampling is Poisson at ``q = expected_batch_size / dataset_size``
(give two of ``expected_batch_size``, ``dataset_size`` and
``sampling_probability``, the dataset size among them: the estimator divides
by the expected batch size). Draw the batches so, with
:class:`zoprivacy.PoissonSampler`; the plan's ``describe()`` says so.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import jax

from zoprivacy.accounting import plan_calibration
from zoprivacy.core import validation
from zoprivacy.estimators import base, registry
from zoprivacy.privacy import plan as plan_lib

_BATCH = ("expected_batch_size", "dataset_size", "sampling_probability")


def private(
  factory: Callable[..., base.PrivateEstimator],
  *,
  target_epsilon: float,
  delta: float,
  num_steps: int,
  expected_batch_size: float | None = None,
  dataset_size: int | None = None,
  sampling_probability: float | None = None,
  **hyperparameters,
) -> tuple[base.PrivateEstimator, plan_lib.PrivacyPlan]:
  """``(estimator, plan)``: ``factory`` with the smallest noise multiplier
  (to 0.2%) whose plan spends at most ``target_epsilon`` at ``delta`` over
  ``num_steps`` steps.

  Args:
    factory: a private zoprivacy estimator factory (``zoprivacy.dpzero``,
      ``zoprivacy.dp_sgd``, ...: one that takes ``noise_multiplier``).
    target_epsilon, delta: the guarantee of the whole run.
    num_steps: how many steps (calls of the estimator's update) the run
      takes; also passed to a factory that takes it (a schedule).
    expected_batch_size, dataset_size, sampling_probability: the Poisson
      sampling (two of them, ``dataset_size`` among them); a factory that
      takes ``setting=`` (Noisy-ZOGD) reads them from its setting.
    **hyperparameters: the factory's other arguments (``clip``,
      ``smoothing``, ``noise``, ...).

  Returns:
    The estimator and its calibrated plan (``delta`` set): the plan every
    state the estimator initializes holds (``zoprivacy.find_plan(state) ==
    plan``), with ``plan.epsilon(num_steps) <= target_epsilon``.
  """
  target_epsilon = validation.epsilon(target_epsilon, "target_epsilon")
  delta = validation.delta(delta)
  num_steps = validation.num_steps(num_steps)
  takes = inspect.signature(factory).parameters
  _check_factory(factory, takes, hyperparameters)
  kwargs = dict(hyperparameters)
  kwargs.update(
    _batch_arguments(
      takes, expected_batch_size, dataset_size, sampling_probability
    )
  )
  if "num_steps" in takes:
    kwargs["num_steps"] = num_steps
  template = _plan_of(
    factory, registry.plan_template(factory, dict(kwargs, noise_multiplier=1.0))
  )
  calibrated = plan_calibration.calibrate_plan(
    template.replace(delta=delta),
    target_epsilon=target_epsilon,
    num_steps=num_steps,
  )
  estimator = factory(noise_multiplier=calibrated.noise_multiplier, **kwargs)
  plan = estimator.privacy_plan.replace(delta=delta)
  if plan != calibrated and plan.epsilon(num_steps) > target_epsilon:
    raise AssertionError(  # a factory that rounds its multiplier upward
      f"{factory.__name__} built a plan that misses the target: "
      f"{plan.describe()}."
    )
  return _holding(estimator, plan), plan


def _check_factory(factory, takes, hyperparameters) -> None:
  name = getattr(factory, "__name__", repr(factory))
  if "noise_multiplier" not in takes:
    raise TypeError(
      f"zoprivacy.private({name}, ...): {name} takes no noise_multiplier, "
      "so there is no noise to calibrate (a non-private baseline, or not a "
      "zoprivacy estimator factory). Pass a private factory such as "
      "zoprivacy.dpzero."
    )
  if "noise_multiplier" in hyperparameters:
    raise TypeError(
      "zoprivacy.private calibrates noise_multiplier for target_epsilon; "
      f"give one of them. With a multiplier of your own, call {name}(...) "
      "directly and read the epsilon spent with zoprivacy.epsilon(state, "
      "delta)."
    )


def _batch_arguments(takes, expected_batch_size, dataset_size, probability):
  """The factory's ``expected_batch_size`` and ``dataset_size`` from two of
  the three ways of giving the Poisson sampling."""
  given = [
    n
    for n, v in zip(_BATCH, (expected_batch_size, dataset_size, probability))
    if v is not None
  ]
  if "expected_batch_size" not in takes:
    if given:
      raise TypeError(
        f"This estimator takes its batches from setting=, not {given}."
      )
    return {}
  if dataset_size is None or len(given) != 2:
    raise TypeError(
      "zoprivacy.private needs the Poisson sampling as dataset_size and "
      "one of expected_batch_size or sampling_probability (the estimator "
      f"divides by the expected batch size); got {given or 'none'}."
    )
  dataset_size = validation.positive_int("dataset_size", dataset_size)
  if probability is not None:
    probability = validation.sampling_probability(probability)
    expected_batch_size = probability * dataset_size
  expected_batch_size, dataset_size = validation.batch_size_and_dataset(
    expected_batch_size, dataset_size
  )
  if math.isclose(expected_batch_size, round(expected_batch_size)):
    expected_batch_size = round(expected_batch_size)
  return dict(
    expected_batch_size=expected_batch_size, dataset_size=dataset_size
  )


def _plan_of(factory, plan) -> plan_lib.PrivacyPlan:
  if not isinstance(plan, plan_lib.PrivacyPlan) or not plan.is_noised:
    raise TypeError(
      f"zoprivacy.private: {getattr(factory, '__name__', factory)} did not "
      "build a private zoprivacy estimator (one with a noised privacy_plan); "
      "pass the estimator factory itself, and wrap the estimator it returns "
      "(optax.chain, ...) afterwards."
    )
  return plan


def _holding(estimator, plan) -> base.PrivateEstimator:
  """``estimator`` whose states hold ``plan`` (its own, with ``delta``)."""
  is_plan = lambda x: isinstance(x, plan_lib.PrivacyPlan)

  def init(params):
    state = estimator.init(params)
    return jax.tree.map(
      lambda x: plan if is_plan(x) else x, state, is_leaf=is_plan
    )

  return base.PrivateEstimator(init, estimator.update, plan)
