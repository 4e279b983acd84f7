"""Metrics of a run: the task's test metrics, the metrics files and the plot.

A task names its metrics (``Task.metric_names``; the first is the headline):
``test_accuracy`` for a classifier, ``test_f1`` and ``test_exact_match`` for
a generation task (SQuAD, DROP). Only test-set metrics, the privacy spent
and statistics of what the steps released (already public,
:mod:`experiments.run.training_signal`) are written: a training loss on private
batches is itself private and is never written out.
"""

from __future__ import annotations

import csv
import io
import json
import os

import jax
import numpy as np

from experiments.run.settings import Settings


def evaluate(
  predict, trainable, frozen, inputs, labels, batch_size: int = 512
) -> float:
  """The accuracy of ``predict``'s argmax, in chunks of ``batch_size``
  rows. The last chunk is padded to ``batch_size`` (its padding's
  predictions dropped): one program for every test set, whose size (a
  record's place in a keyed split depends on its contents) never reaches a
  compiled program's shape or name."""
  correct = 0
  for start in range(0, len(labels), batch_size):
    rows = np.arange(start, start + batch_size)
    real = rows < len(labels)
    rows = np.where(real, rows, start)  # padding: copies of the chunk's first
    chunk = jax.tree.map(lambda a, rows=rows: a[rows], inputs)
    predicted = np.argmax(np.asarray(predict(trainable, frozen, chunk)), -1)
    correct += int(np.sum((predicted == labels[rows]) & real))
  return correct / len(labels)


def evaluate_task(task, predict, params, frozen) -> dict[str, float]:
  """The task's test metrics, ``{name: value}`` in ``task.metric_names``'
  order (the first is the headline metric).

  Every writer (progress bar, metrics files, ``result.json``, report, plot)
  uses the names this returns. A classifier (``task.evaluate is None``):
  ``{"test_accuracy": ...}``, the accuracy of the argmax of
  ``predict(params, frozen, inputs)`` over the candidates. A task with its
  own ``evaluate`` (greedy decoding scored by F1 / exact match for SQuAD and
  DROP): what it returns, checked against its declared names; such a task
  never reports an accuracy.
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


# The released values' statistics in a row (experiments.run.training_signal).
SIGNAL_PREFIX = "released_"

# The metrics of a run that evaluates on records held out of its private
# training pool (``config.eval_split="validation"``) take this prefix in
# place of ``test_``; every report names them so, first.
PRIVATE_VALIDATION_PREFIX = "private_validation_"
NOT_ACCOUNTED = "not private, not accounted"


def evaluates_private_records(settings: Settings) -> bool:
  """Whether the run's evaluation set is held out of its private training
  pool: ``eval_split="validation"`` (a task's declared field) on the
  private data (a public proxy evaluates on public data)."""
  split = settings.declared.get("eval_split") or "test"
  return split == "validation" and not settings.public_proxy


def as_private_validation(scores: dict[str, float]) -> dict[str, float]:
  """``test_accuracy`` -> ``private_validation_accuracy`` (each name)."""
  return {
    PRIVATE_VALIDATION_PREFIX + k.removeprefix("test_"): v
    for k, v in scores.items()
  }


def private_evaluation_note(names, size: int) -> str:
  """What a report says first about metrics computed on private records."""
  labels = ", ".join(metric_label(n) for n in names)
  return (
    f"{NOT_ACCOUNTED}: the {labels} is computed exactly on {size:,} "
    "records held out of the private training pool "
    "(config.eval_split='validation') and released without noise; no "
    "epsilon covers it, so neither publish it nor choose the "
    "hyperparameters of a released model with it (experiments.tune scores "
    "its trials with counted noise)"
  )


def metric_names(row: dict) -> list[str]:
  """The metric names of a history row (what is neither step, epsilon,
  seconds nor a released-value statistic), headline first."""
  return [
    k
    for k in row
    if k not in ("step", "epsilon", "seconds")
    and not k.startswith(SIGNAL_PREFIX)
  ]


def _replace(path: str, text: str) -> None:
  """Writes ``text`` to ``path`` atomically (temp file, fsync, rename)."""
  tmp = path + ".tmp"
  with open(tmp, "w", newline="") as f:
    f.write(text)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


class MetricsWriter:
  """Appends metric rows to ``metrics.csv`` and ``metrics.jsonl`` (and
  TensorBoard when ``tensorboardX`` is installed). The columns are
  ``step``, the task's metrics, ``epsilon`` and ``seconds``."""

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
    """Rows up to ``step`` from an earlier (interrupted) run. Later rows
    are dropped (the resumed run logs them again), both files rewritten
    atomically and consistently; a note says how many rows were dropped."""
    path = os.path.join(self.workdir or "", "metrics.jsonl")
    if not self.workdir or not os.path.exists(path):
      return []
    with open(path) as f:
      rows = [json.loads(line) for line in f if line.strip()]
    history = [r for r in rows if r["step"] <= step]
    if len(history) < len(rows):
      print(
        f"note: metrics: {len(rows) - len(history)} row(s) after step "
        f"{step} dropped; the resumed run logs those steps again."
      )
    _replace(path, "".join(json.dumps(r) + "\n" for r in history))
    buf = io.StringIO()
    if history:
      w = csv.DictWriter(buf, fieldnames=list(history[0]))
      w.writeheader()
      w.writerows(history)
    _replace(os.path.join(self.workdir, "metrics.csv"), buf.getvalue())
    return history

  def write(self, row: dict) -> None:
    if not self.workdir:
      return
    path = os.path.join(self.workdir, "metrics.csv")
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
      w = csv.DictWriter(f, fieldnames=list(row))
      if new:
        w.writeheader()
      w.writerow(row)
    with open(os.path.join(self.workdir, "metrics.jsonl"), "a") as f:
      f.write(json.dumps(row) + "\n")
    if self._tb is not None:
      signal = [k for k in row if k.startswith(SIGNAL_PREFIX)]
      for k in [*metric_names(row), "epsilon", *signal]:
        if row.get(k) is not None:
          self._tb.add_scalar(k, row[k], row["step"])


def _spans_decades(values) -> bool:
  """Positive values over more than two decades: a log axis shows them."""
  return min(values) > 0 and max(values) > 100 * min(values)


def plot_report(history: list[dict], path: str, title: str) -> str | None:
  """PNG of the task's test metrics against step and against epsilon, and
  of the released values' RMS (the public training signal) against step."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  steps = [h["step"] for h in history]
  names = metric_names(history[0])
  eps = [h.get("epsilon") for h in history]
  private = all(e is not None and np.isfinite(e) for e in eps)
  signal = [
    (h["step"], h["released_rms"])
    for h in history
    if h.get("released_rms") is not None
  ]
  panels = 1 + private + bool(signal)
  width = 5 * panels  # inches
  fig, axes = plt.subplots(1, panels, figsize=(width, 4), squeeze=False)
  axes = axes[0]
  ylabel = ", ".join(metric_label(m) for m in names)
  for name in names:
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
  if signal:
    axes[-1].plot(*zip(*signal), marker="o")
    axes[-1].set(
      xlabel="step",
      ylabel="RMS of the released values",
      title="training signal (public releases)",
      yscale="log" if _spans_decades([v for _, v in signal]) else "linear",
    )
  if len(names) > 1:
    axes[0].legend()
  # Fixed margins (0.9 inch on the left for the tick labels and the axis
  # label): tight_layout would draw the figure once more to measure it
  # (0.3 s of each run's ~0.8 s of plotting on 2 cores).
  fig.subplots_adjust(
    left=0.9 / width, right=1 - 0.15 / width, bottom=0.13, top=0.9,
    wspace=0.35,
  )  # fmt: skip
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path
