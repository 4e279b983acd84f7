"""Strongly convex tasks for Noisy-ZOGD: L2-regularized logistic regression.

Multinomial logistic regression on unit-normalized inputs, ``x~ = (x /
||x||, 1) / sqrt(2)`` (so ``||x~|| = 1``; a data-independent, per-example
transform), with per-example loss

  l(W; x, y) = CE(W x~, y) + (lam / 2) ||W||^2.

Every constant Thm 3.2 needs follows from ``lam`` and the ball, without
looking at the data (Chien, Chen & Li, Thm 3.2 and Cor. 3.3 assumptions):

* smoothness ``M = 1/2 + lam``: the softmax cross-entropy's Hessian in the
  logits has spectral norm at most 1/2 and ``||x~|| = 1``;
* strong convexity ``m = lam``, so ``m / M = lam / (1/2 + lam)``;
* Lipschitz ``L = sqrt(2) + lam (R + xi)`` on the ball where the losses are
  queried (``||p - e_y|| <= sqrt(2)``); the clip must be at least ``L``.

The runner checks and calibrates Noisy-ZOGD's final-iterate epsilon from
these constants and the parameter dimension (:func:`assumptions`,
:func:`dimension`) before the task's data loads.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np
import optax

from experiments.tasks.registry import register
from experiments.tasks.task import Task
from zoprivacy.data import loaders
from zoprivacy.hidden_state import setting as setting_lib

# (features, classes) of each dataset, known without loading it.
SHAPES = {"digits": (64, 10), "fashion_mnist": (784, 10)}
# The config fields the tasks read: the L2 weight and the ball's radius.
FIELDS = ("l2", "radius")


def dimension(dataset: str) -> int:
  features, classes = SHAPES[dataset]
  return (features + 1) * classes


def assumptions(
  l2: float, radius: float, smoothing: float
) -> setting_lib.LossAssumptions:
  """The declared constants (the module's docstring)."""
  for name, value in (("l2", l2), ("radius", radius), ("smoothing", smoothing)):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
      field = "estimator_kwargs.smoothing" if name == "smoothing" else name
      raise ValueError(
        f"{name} must be a number (Noisy-ZOGD's loss constants follow from "
        f"l2, radius and smoothing), got {value!r}: set --config.{field}."
      )
  if not l2 > 0:
    raise ValueError(
      f"The L2 regularization must be > 0 for a strongly "
      f"convex loss, got {l2!r}."
    )
  return setting_lib.LossAssumptions(
    smoothness=0.5 + l2,
    lipschitz=math.sqrt(2.0) + l2 * (radius + smoothing),
    strong_convexity=l2,
  )


def normalize(inputs: np.ndarray) -> np.ndarray:
  """``x / (sqrt(2) ||x||)`` per example, flattened (float32)."""
  flat = inputs.reshape(len(inputs), -1).astype(np.float64)
  norms = np.maximum(np.linalg.norm(flat, axis=1, keepdims=True), 1e-12)
  return (flat / (math.sqrt(2.0) * norms)).astype(np.float32)


@dataclasses.dataclass
class LogRegTask(Task):
  """A :class:`~experiments.Task` whose loss adds ``lam/2 ||W||^2``."""

  l2: float = 0.0
  loss_assumptions: setting_lib.LossAssumptions | None = None

  def batched_loss(self, trainable, frozen, batch):
    inputs, labels = batch
    ce = optax.softmax_cross_entropy_with_integer_labels(
      self.apply(trainable, frozen, inputs), labels
    )
    sq = sum(jnp.sum(jnp.square(x)) for x in (trainable["w"], trainable["b"]))
    return ce + 0.5 * self.l2 * sq


def _logreg(config, splits, dataset: str) -> LogRegTask:
  features, classes = SHAPES[dataset]

  def init(key):
    del key  # zeros: inside the ball and independent of the data
    return {
      "w": jnp.zeros((features, classes)),
      "b": jnp.zeros(classes),
    }, {}

  def apply(trainable, frozen, inputs):
    del frozen
    return inputs @ trainable["w"] + trainable["b"] / math.sqrt(2.0)

  l2 = float(config.l2)
  kw = config.estimator_kwargs
  return LogRegTask(
    normalize(splits.train.inputs),
    splits.train.labels,
    normalize(splits.test.inputs),
    splits.test.labels,
    classes,
    init,
    apply,
    sampling_schemes=("full_batch", "without_replacement"),
    l2=l2,
    loss_assumptions=assumptions(l2, config.radius, kw.smoothing),
  )


@register("digits_logreg", fields=FIELDS)
def digits_logreg(config) -> LogRegTask:
  return _logreg(config, loaders.load_digits(seed=config.seed), "digits")


@register("fashion_mnist_logreg", fields=FIELDS)
def fashion_mnist_logreg(config) -> LogRegTask:
  return _logreg(
    config,
    loaders.load_fashion_mnist(data_dir=config.get("data_dir") or None),
    "fashion_mnist",
  )
