"""Whether a run's final score is within noise of chance.

The test: a one-sided exact binomial test at level :data:`LEVEL` (0.01).
With ``n`` test examples of which ``k`` are right, and a chance rate ``p``,
the null hypothesis is that the model gets each test example right with
probability at most ``p``; its p-value is ``P[Binomial(n, p) >= k]``. A
p-value above the level means the score is within noise of chance: the
run cannot be told from a model that learned nothing (a model truly at
chance is flagged with probability at least 0.99). A score significantly
*below* chance is flagged too (it is not above it).

The chance rate ``p``:

* a classifier (accuracy of the argmax over classes): the share of the
  majority class in the test labels, which is what a constant prediction
  scores; it is at least the uniform rate ``1 / num_classes``;
* a multiple-choice task with its own candidates (``Task.chance_accuracy``,
  COPA and ReCoRD): the larger of a uniform guess's expected accuracy and
  that of always taking the first candidate (what a model with constant
  scores does). The guesses' successes are then independent but not
  identically distributed; for a count above its mean the binomial tail at
  the mean rate bounds theirs from above (Hoeffding 1956), so the test
  errs towards saying "at chance";
* generation tasks (F1, exact match): not tested. F1 is not a count of
  successes, so no binomial test applies; the constant (empty) answer
  scores 0 on both, so there is no chance rate to test against.
"""

from __future__ import annotations

from typing import Any

import numpy as np

LEVEL = 0.01
TEST = (
  "one-sided exact binomial test, H0: each test example right with "
  "probability at most the chance rate"
)


def _classifier_rate(task) -> tuple[float, str]:
  labels = np.asarray(task.test_labels).astype(np.int64).ravel()
  counts = np.bincount(labels, minlength=max(int(task.num_classes), 1))
  top = int(np.argmax(counts))
  return float(counts[top] / len(labels)), (
    f"the majority class (label {top}: {int(counts[top])} of {len(labels)} "
    f"test examples; a uniform guess over {len(counts)} classes: "
    f"{1 / len(counts):.4f})"
  )


def chance_rate(task, metric: str) -> tuple[float | None, str]:
  """``(p, what it is)`` for ``task``'s ``metric``; ``(None, why not)``
  where no test applies."""
  if getattr(task, "chance_accuracy", None) is not None:
    return task.chance_accuracy
  accuracy = metric.endswith("_accuracy")  # test_ or private_validation_
  if task.evaluate is None and accuracy:
    if len(task.test_labels) == 0:
      return None, "the test set is empty"
    return _classifier_rate(task)
  if accuracy:
    return None, "the task's own evaluation declares no chance rate"
  return None, (
    f"{metric} is not a count of correct answers (no binomial test "
    "applies), and a constant (empty) answer scores 0: no chance rate to "
    "test against"
  )


def assess(task, metrics: dict[str, float]) -> dict[str, Any]:
  """``{"at_chance": bool | None, "chance": {...}}`` for the headline
  metric (the first of ``metrics``); ``at_chance`` is None when untested."""
  metric, score = next(iter(metrics.items()))
  rate, baseline = chance_rate(task, metric)
  if rate is None:
    return {
      "at_chance": None,
      "chance": {"metric": metric, "tested": False, "reason": baseline},
    }
  # Imported on use: scipy.stats takes a while to load, and only a
  # finished run needs it.
  from scipy import stats  # pylint: disable=g-import-not-at-top

  n = len(task.test_labels)
  k = int(round(float(score) * n))
  p_value = float(stats.binom.sf(k - 1, n, rate))
  return {
    "at_chance": p_value > LEVEL,
    "chance": {
      "metric": metric,
      "tested": True,
      "score": float(score),
      "chance_rate": rate,
      "baseline": baseline,
      "test_size": n,
      "correct": k,
      "p_value": p_value,
      "level": LEVEL,
      "test": TEST,
    },
  }


def headline(result: dict[str, Any], label: str) -> str | None:
  """The report's first line for a result at chance (its headline metric
  printed as ``label``), else None."""
  if not result.get("at_chance"):
    return None
  c = result["chance"]
  return (
    f"AT CHANCE: {label} {c['score']:.4f} is within noise of chance "
    f"({c['chance_rate']:.4f}, {c['baseline']}; {c['correct']} of "
    f"{c['test_size']} right, one-sided binomial p = {c['p_value']:.2g} > "
    f"{c['level']:g}): this run has not measurably learned."
  )
