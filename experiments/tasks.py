"""A task: the data, the model and the loss of one experiment."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import ml_collections
import numpy as np
import optax

from zoprivacy.data import loaders
from zoprivacy.models import small


@dataclasses.dataclass
class Task:
  train_inputs: np.ndarray
  train_labels: np.ndarray
  test_inputs: np.ndarray
  test_labels: np.ndarray
  num_classes: int
  model: Any

  def init_params(self, key):
    return self.model.init(key, self.train_inputs[:1])

  def predict(self, params, inputs):
    return self.model.apply(params, inputs)

  def batched_loss(self, params, batch):
    """Per-example cross-entropy, ``[B]``; the model mixes no examples."""
    inputs, labels = batch
    logits = self.model.apply(params, inputs)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


MODELS: dict[str, Callable[..., Any]] = {"cnn": small.SmallCNN, "mlp": small.MLP}


def get_task(config: ml_collections.ConfigDict) -> Task:
  if config.dataset != "digits":
    raise ValueError(f"Unknown dataset {config.dataset!r}.")
  splits = loaders.load_digits(seed=config.seed)
  model = MODELS[config.model](num_classes=splits.train.num_classes,
                               **config.get("model_kwargs", {}))
  return Task(splits.train.inputs, splits.train.labels, splits.test.inputs,
              splits.test.labels, splits.train.num_classes, model)
