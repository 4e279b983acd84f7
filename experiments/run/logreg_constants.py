"""The logistic-regression tasks' shapes and loss constants, known before
any data loads.

Noisy-ZOGD's final-iterate epsilon needs the loss's smoothness, Lipschitz
and strong-convexity constants and the parameter dimension
(:mod:`zoprivacy.hidden_state.setting`); the runner checks and calibrates
them before the task is built, so they live here, below the tasks
(:mod:`experiments.tasks.logreg` derives them and builds the tasks).
"""

from __future__ import annotations

import math

from zoprivacy.hidden_state import setting as setting_lib

# (features, classes) of each dataset, known without loading it.
SHAPES = {"digits": (64, 10), "fashion_mnist": (784, 10)}


def dimension(dataset: str) -> int:
  features, classes = SHAPES[dataset]
  return (features + 1) * classes


def assumptions(
  l2: float, radius: float, smoothing: float
) -> setting_lib.LossAssumptions:
  """The declared constants (:mod:`experiments.tasks.logreg`'s docstring)."""
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
