"""A task: the data, the model and the loss of one experiment.

``trainable`` parameters are what the estimator perturbs; ``frozen`` ones
(a pretrained encoder under LoRA or BitFit, say) are passed to the loss as a
separate argument, so they are neither perturbed nor baked into the compiled
step as constants. A builder makes one from a config; it is registered in
:mod:`experiments.tasks.registry` under its ``config.dataset`` name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import optax


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
