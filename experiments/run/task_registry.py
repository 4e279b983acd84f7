"""A task: the data, the model and the loss of one experiment; the registry.

``trainable`` parameters are what the estimator perturbs; ``frozen`` ones
(a pretrained encoder under LoRA or BitFit, say) are passed to the loss as a
separate argument, so they are neither perturbed nor baked into the compiled
step as constants. ``config.dataset`` names a task registered here with
:func:`register`; the modules of :mod:`experiments.tasks` register theirs
when the package is imported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import ml_collections
import numpy as np
import optax

from experiments.run import config_fields


@dataclasses.dataclass
class Task:
  """Data (numpy pytrees with a leading example axis) and a classifier."""

  train_inputs: Any
  train_labels: np.ndarray
  test_inputs: Any
  test_labels: np.ndarray
  num_classes: int
  init: Callable[[jax.Array], tuple[Any, Any]]  # key -> (trainable, frozen)
  apply: Callable[
    [Any, Any, Any], jax.Array
  ]  # (trainable, frozen, inputs) -> logits
  public_inputs: Any = None
  public_labels: np.ndarray | None = None
  # Batch samplers this task's data supports. In-memory arrays support both;
  # a streamed source can only be read in order (shuffled by a buffer), so
  # it cannot give the independent per-example inclusion Poisson needs.
  sampling_schemes: tuple[str, ...] = ("poisson", "shuffle")
  # ``(trainable, frozen, batch, perturbation) -> [B]`` losses at the
  # perturbed parameters, perturbing each layer inside the model's scan
  # (zoprivacy.training.layerwise); tasks that have one can run
  # config.layerwise.
  perturbed_loss: Callable | None = None
  # The task's own test-set evaluation, ``(trainable, frozen) -> {name:
  # value}`` with the keys of ``metric_names`` in order (the first is the
  # headline): greedy decoding scored by F1 and exact match for the
  # generation tasks. None: a classifier, scored by the accuracy of the
  # argmax of ``apply`` (``experiments.run.metrics.evaluate_task``).
  evaluate: Callable[[Any, Any], dict[str, float]] | None = None
  metric_names: tuple[str, ...] = ("test_accuracy",)
  # ``(rate, what it is)``: the accuracy of chance on the test set, for a
  # task with its own evaluate that scores an accuracy (multiple choice).
  # None: from the test labels for a classifier, untested for F1
  # (experiments.run.chance).
  chance_accuracy: tuple[float, str] | None = None
  # ``(trainable, frozen) -> zoprivacy.models.hf_export.Exportable``: the
  # fine-tuned model as a Hugging Face checkpoint (python -m
  # experiments.export). None: the task's model has no such format.
  export: Callable[[Any, Any], Any] | None = None

  @property
  def num_train(self) -> int:
    return len(self.train_labels)

  def batched_loss(self, trainable, frozen, batch):
    """Per-example cross-entropy, ``[B]``; no model here mixes examples."""
    inputs, labels = batch
    logits = self.apply(trainable, frozen, inputs)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


TaskBuilder = Callable[[ml_collections.ConfigDict], Task]
TASKS: dict[str, TaskBuilder] = {}


def register(name: str, *, fields=None, public_splits=()):
  """Decorator: ``@register('cifar10')`` makes ``config.dataset='cifar10'`` work.

  ``fields``: the config fields the builder reads beyond the default schema
  (a runner refuses any other, :mod:`experiments.run.config_fields`; the
  built-in tasks are listed there); ``public_splits``: the values of
  ``config.public`` it accepts."""

  def wrap(builder: TaskBuilder) -> TaskBuilder:
    if name in TASKS:
      raise ValueError(f"Task {name!r} is registered twice.")
    TASKS[name] = builder
    if fields is not None or name not in config_fields.TASK_FIELDS:
      config_fields.declare_task(name, fields, public_splits)
    return builder

  return wrap


def build_task(config: ml_collections.ConfigDict) -> Task:
  """Builds the task named by ``config.dataset`` (its private data; see
  :func:`experiments.tasks.get_task` for the public proxy)."""
  if config.dataset not in TASKS:
    raise ValueError(
      f"Unknown dataset {config.dataset!r}; choose one of {sorted(TASKS)}."
    )
  return TASKS[config.dataset](config)


def get_task(config: ml_collections.ConfigDict) -> Task:
  """Builds the task ``config.dataset`` names, as
  :func:`experiments.tasks.get_task` does (with its public proxy)."""
  # The built-in tasks register themselves when the tasks package loads; it
  # sits above the runner (it imports this module), so the runner loads it on
  # its first lookup, as a plug-in.
  from experiments import tasks  # pylint: disable=g-import-not-at-top

  return tasks.get_task(config)
