"""A task: the data, the model and the loss of one experiment."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import ml_collections
import numpy as np
import optax

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


def load_digits_split(seed: int = 0, test_fraction: float = 0.2):
  """scikit-learn's bundled 8x8 digits, scaled to [0, 1], stratified split."""
  from sklearn import datasets, model_selection  # pylint: disable=g-import-not-at-top
  digits = datasets.load_digits()
  x = (digits.images / 16.0).astype(np.float32)[..., None]
  y = digits.target.astype(np.int32)
  return model_selection.train_test_split(
      x, y, test_size=test_fraction, random_state=seed, stratify=y)


MODELS: dict[str, Callable[..., Any]] = {"cnn": small.SmallCNN, "mlp": small.MLP}


def get_task(config: ml_collections.ConfigDict) -> Task:
  if config.dataset != "digits":
    raise ValueError(f"Unknown dataset {config.dataset!r}.")
  x_train, x_test, y_train, y_test = load_digits_split(config.seed)
  model = MODELS[config.model](num_classes=10, **config.get("model_kwargs", {}))
  return Task(x_train, y_train, x_test, y_test, 10, model)
