"""``config.layerwise``: the runner's step at inference-level memory.

For a task that provides an in-scan loss (``task.perturbed_loss``, the
causal LM tasks: OPT, Llama, Mistral), the runner can replace the generic
two-point step plus SGD by the layer-wise step of
:mod:`zoprivacy.training.layerwise`: each layer's slice of the direction is
added inside the layer scan as the layer is used, and the update regenerates the
direction leaf by leaf into the donated parameters. Nothing else changes:
the estimator's hyperparameters, its privacy plan (checked equal to the
generic estimator's), the calibration, the ledger, the secret noise and the
exact-noise path are those of the generic run, and a step is the generic
``estimator + optax.sgd(learning_rate)`` step with counter-hash directions.

Supported: ``mezo``, ``dpzero`` and ``dp_zo`` with ``optimizer='sgd'`` (no
momentum, no schedule, no optimizer arguments: the update is plain SGD)
and Gaussian or Rademacher directions, drawn by a counter hash
(``direction_prng``: ``'auto'``, the default, draws with ``'counter2'``,
as the generic step does on a model of at least 2^16 parameters; or
``'counter'``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from zoprivacy.training import layerwise
from zoprivacy.zo import directions

if TYPE_CHECKING:
  from experiments.run.settings import Settings

STEPS = {
  "mezo": layerwise.layerwise_mezo,
  "dpzero": layerwise.layerwise_dpzero,
  "dp_zo": functools.partial(
    layerwise.layerwise_dpzero, clip_target="raw_difference"
  ),
}


def check(settings: Settings, task) -> None:
  """Refuses, before any step, what the layer-wise step cannot run."""
  if settings.estimator not in STEPS:
    raise ValueError(
      f"layerwise=True runs {', '.join(STEPS)}, not {settings.estimator!r}; "
      "set layerwise=False for the generic step."
    )
  if (
    settings.optimizer != "sgd"
    or settings.momentum
    or settings.schedule
    or settings.optimizer_kwargs
  ):
    raise ValueError(
      "layerwise=True applies plain SGD inside the step: set "
      "optimizer='sgd' with no momentum, schedule or optimizer_kwargs."
    )
  prng = settings.estimator_kwargs.get("direction_prng", "auto")
  if prng not in ("auto",) + directions.COUNTER_PRNGS:
    raise ValueError(
      "layerwise=True draws directions with a counter hash only; set "
      "estimator_kwargs.direction_prng to 'auto' or one of "
      f"{directions.COUNTER_PRNGS} (got {prng!r})."
    )
  if getattr(task, "perturbed_loss", None) is None:
    raise ValueError(
      f"layerwise=True needs a task with an in-scan loss; {settings.dataset!r} "
      "has none (the causal LM tasks do)."
    )


def make(settings: Settings, resolved, task):
  """The :class:`zoprivacy.training.layerwise.LayerwiseZO` of the run, from
  the factory arguments of its ``resolved`` generic estimator
  (:func:`experiments.run.run_setup.resolve`); its plan is checked equal to
  that estimator's."""
  check(settings, task)
  kwargs = dict(resolved.kwargs)
  if kwargs.get("direction_prng", "auto") == "auto":  # a large model's choice
    kwargs["direction_prng"] = directions.AUTO_COUNTER
  privacy = kwargs.get("privacy")
  if privacy is not None and privacy.clip is None:  # the estimator's default
    kwargs["privacy"] = privacy.replace(clip=resolved.plan.clip)
  zo = STEPS[settings.estimator](
    perturbed_loss=task.perturbed_loss,
    learning_rate=settings.learning_rate,
    **kwargs,
  )
  if resolved.plan != zo.privacy_plan:
    raise AssertionError(
      "The layer-wise step's privacy plan differs from the estimator's."
    )
  return zo


def step_fn(zo, placement):
  """The layer-wise step under the runner's one step contract:
  ``(params, frozen, opt_state, batch, public, noise) -> (params,
  opt_state)``."""

  def step(params, frozen, opt_state, batch, public, noise):
    del public  # the layer-wise estimators take no public data
    params, opt_state = zo.step(
      params, opt_state, batch, frozen=frozen, discrete_noise=noise
    )
    return placement.constrain(params), opt_state

  return step
