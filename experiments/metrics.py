"""Metrics of a run: test accuracy, the metrics files and the report plot.

Only test-set metrics and the privacy spent are written: a training loss on
private batches is itself private and is never written out.
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


class MetricsWriter:
  """Appends metric rows to ``metrics.csv`` and ``metrics.jsonl`` (and
  TensorBoard when ``tensorboardX`` is installed)."""

  FIELDS = ("step", "test_accuracy", "epsilon", "seconds")

  def __init__(self, workdir: str | None):
    self.workdir = workdir
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
      w = csv.DictWriter(f, fieldnames=self.FIELDS)
      if new:
        w.writeheader()
      w.writerow({k: row.get(k) for k in self.FIELDS})
    with open(os.path.join(self.workdir, "metrics.jsonl"), "a") as f:
      f.write(json.dumps(row) + "\n")
    if self._tb is not None:
      for k in ("test_accuracy", "epsilon"):
        if row.get(k) is not None:
          self._tb.add_scalar(k, row[k], row["step"])


def plot_report(history: list[dict], path: str, title: str) -> str | None:
  """PNG of test accuracy against step and against epsilon."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  steps = [h["step"] for h in history]
  acc = [h["test_accuracy"] for h in history]
  eps = [h.get("epsilon") for h in history]
  private = all(e is not None and np.isfinite(e) for e in eps)
  fig, axes = plt.subplots(
    1,
    2 if private else 1,
    figsize=(10, 4) if private else (5.5, 4),
    squeeze=False,
  )
  axes = axes[0]
  axes[0].plot(steps, acc, marker="o")
  axes[0].set(
    xlabel="step",
    ylabel="test accuracy",
    title=title if private else f"{title} (non-private)",
  )
  if private:
    axes[1].plot(eps, acc, marker="o")
    axes[1].set(xlabel="epsilon spent", ylabel="test accuracy")
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path
