"""Metrics of a run: the task's test metrics, the metrics files and the plot.

A task names its metrics (``Task.metric_names``; the first is the headline):
``test_accuracy`` for a classifier, ``test_f1`` and ``test_exact_match`` for
a generation task (SQuAD, DROP). Only test-set metrics and the privacy spent
are written: a training loss on private batches is itself private and is
never written out.
"""

from __future__ import annotations

import csv
import json
import os

import jax
import numpy as np


def evaluate(
  predict, trainable, frozen, inputs, labels, batch_size: int = 512
) -> float:
  correct = 0
  for start in range(0, len(labels), batch_size):
    rows = slice(start, start + batch_size)
    chunk = jax.tree.map(lambda a, rows=rows: a[rows], inputs)
    logits = predict(trainable, frozen, chunk)
    correct += int(
      np.sum(
        np.argmax(np.asarray(logits), -1) == labels[start : start + batch_size]
      )
    )
  return correct / len(labels)


def evaluate_task(task, predict, params, frozen) -> dict[str, float]:
  """The task's test metrics, ``{name: value}`` in ``task.metric_names``'
  order (the first is the headline metric).

  A classifier (``task.evaluate is None``): ``{"test_accuracy": ...}``, the
  accuracy of the argmax of ``predict(params, frozen, inputs)`` over the
  candidates. A task with its own ``evaluate`` (greedy decoding scored by
  F1 / exact match for SQuAD and DROP): what it returns, checked against
  its declared names; such a task never reports an accuracy.
  """
  names = tuple(task.metric_names)
  if task.evaluate is None:
    if names != ("test_accuracy",):
      raise ValueError(
        f"The task declares the metrics {names} but no evaluate function; "
        "only a classifier is scored by the accuracy of its argmax."
      )
    return {
      "test_accuracy": evaluate(
        predict, params, frozen, task.test_inputs, task.test_labels
      )
    }
  scores = {k: float(v) for k, v in task.evaluate(params, frozen).items()}
  if tuple(scores) != names:
    raise ValueError(
      f"The task's evaluate returned {tuple(scores)}, not its declared "
      f"metrics {names}."
    )
  return scores


def metric_label(name: str) -> str:
  """``test_f1`` -> ``test F1``: a metric's name as reports print it."""
  words = name.replace("_", " ")
  return words.replace(" f1", " F1") if words != "f1" else "F1"


class MetricsWriter:
  """Appends metric rows to ``metrics.csv`` and ``metrics.jsonl`` (and
  TensorBoard when ``tensorboardX`` is installed): the step, the task's
  ``metric_names``, the epsilon spent and the seconds."""

  def __init__(
    self, workdir: str | None, metric_names=("test_accuracy",)
  ) -> None:
    self.workdir = workdir
    self.metric_names = tuple(metric_names)
    self.fields = ("step", *self.metric_names, "epsilon", "seconds")
    self._tb = None
    if workdir:
      os.makedirs(workdir, exist_ok=True)
      try:
        from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top

        self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"))
      except ImportError:
        self._tb = None

  def resume(self, step: int) -> list[dict]:
    """Rows up to ``step`` from an earlier (interrupted) run; later rows are
    dropped, since the resumed run logs them again."""
    path = os.path.join(self.workdir or "", "metrics.jsonl")
    if not self.workdir or not os.path.exists(path):
      return []
    with open(path) as f:
      history = [r for r in map(json.loads, f) if r["step"] <= step]
    for name in ("metrics.jsonl", "metrics.csv"):
      os.remove(os.path.join(self.workdir, name))
    for row in history:
      self.write(row)
    return history

  def write(self, row: dict) -> None:
    if not self.workdir:
      return
    path = os.path.join(self.workdir, "metrics.csv")
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
      w = csv.DictWriter(f, fieldnames=self.fields)
      if new:
        w.writeheader()
      w.writerow({k: row.get(k) for k in self.fields})
    with open(os.path.join(self.workdir, "metrics.jsonl"), "a") as f:
      f.write(json.dumps(row) + "\n")
    if self._tb is not None:
      for k in (*self.metric_names, "epsilon"):
        if row.get(k) is not None:
          self._tb.add_scalar(k, row[k], row["step"])


def plot_report(
  history: list[dict],
  path: str,
  title: str,
  metric_names=("test_accuracy",),
) -> str | None:
  """PNG of the task's test metrics against step and against epsilon."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  steps = [h["step"] for h in history]
  eps = [h.get("epsilon") for h in history]
  private = all(e is not None and np.isfinite(e) for e in eps)
  fig, axes = plt.subplots(
    1,
    2 if private else 1,
    figsize=(10, 4) if private else (5.5, 4),
    squeeze=False,
  )
  axes = axes[0]
  ylabel = ", ".join(metric_label(m) for m in metric_names)
  for name in metric_names:
    values = [h.get(name) for h in history]
    axes[0].plot(steps, values, marker="o", label=metric_label(name))
    if private:
      axes[1].plot(eps, values, marker="o", label=metric_label(name))
  axes[0].set(
    xlabel="step",
    ylabel=ylabel,
    title=title if private else f"{title} (non-private)",
  )
  if private:
    axes[1].set(xlabel="epsilon spent", ylabel=ylabel)
  if len(metric_names) > 1:
    axes[0].legend()
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path
