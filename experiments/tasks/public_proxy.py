"""A task whose private data is replaced by public data: hyperparameters
chosen on it cost no privacy.

The privacy guarantee of a run covers that run only. Choosing its step size
(or clipping norm, or number of steps) by trying several values on private
data and keeping the best leaks information that its epsilon does not
count. Choosing them on a *public proxy* leaks nothing: the proxy task
trains on public examples and evaluates on other public examples, with the
same model, the same loss and the same privacy plan (same number of training
examples, hence the same sampling rate, noise and epsilon). Only the task's
public data is read; the private training and test sets are dropped.

``config.public_proxy=True`` turns any task with public data
(``config.public``) into its proxy; ``experiments/public_selection.py`` runs
a grid on it and reports the selected values.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import jax
import numpy as np

if TYPE_CHECKING:
  from experiments.tasks.task import Task


def _take(tree, idx):
  return jax.tree.map(lambda a: np.asarray(a)[idx], tree)


def _balanced(order, labels, num_classes, per_class, eval_size):
  """Per class, in ``order``: ``per_class`` training examples, then
  ``eval_size // num_classes`` evaluation examples."""
  per_eval = eval_size // num_classes
  train, evaluation = [], []
  for c in range(num_classes):
    rows = order[labels[order] == c]
    if len(rows) < per_class + per_eval:
      raise ValueError(
        f"public_proxy needs {per_class} training and {per_eval} evaluation "
        f"examples of class {c}, but the public set has {len(rows)}."
      )
    train.append(rows[:per_class])
    evaluation.append(rows[per_class : per_class + per_eval])
  return np.concatenate(train), np.concatenate(evaluation)


def public_proxy_task(
  task: Task, *, eval_size: int, seed: int, per_class: int | None = None
) -> Task:
  """``task`` with its training and test sets drawn from its public data.

  A seeded permutation of the public examples gives, in order:

  * the training set: ``task.num_train`` examples, as many as the private
    training set, so the proxy run has the private run's sampling rate,
    calibrated noise and epsilon;
  * the evaluation set (``test_inputs``): the next ``eval_size`` examples;
  * the public set (for public-data estimators such as PAZO): the remaining
    examples, or ``None`` when none remain.

  With ``per_class`` (the config's ``examples_per_class``: a training set
  balanced by construction), the training set takes ``per_class`` examples
  of each class and the evaluation set ``eval_size // num_classes`` of each
  class. Otherwise the examples are drawn uniformly. Either way the private
  class counts are not read. Raises ``ValueError`` when the task has no
  public data or too little of it.
  """
  _check_public_size(task, eval_size)
  n_public, n_train = len(task.public_labels), task.num_train
  order = np.random.default_rng(seed).permutation(n_public)
  labels = np.asarray(task.public_labels)
  if per_class:
    if per_class * task.num_classes != n_train:
      raise ValueError(
        f"examples_per_class={per_class} but the private training set has "
        f"{n_train} examples, not {per_class * task.num_classes}: the proxy "
        "would not have the private run's sampling rate."
      )
    train_idx, eval_idx = _balanced(
      order, labels, task.num_classes, per_class, eval_size
    )
    rest = np.setdiff1d(order, np.concatenate([train_idx, eval_idx]))
  else:
    train_idx = order[:n_train]
    eval_idx = order[n_train : n_train + eval_size]
    rest = order[n_train + eval_size :]
  return dataclasses.replace(
    task,
    train_inputs=_take(task.public_inputs, train_idx),
    train_labels=labels[train_idx],
    test_inputs=_take(task.public_inputs, eval_idx),
    test_labels=labels[eval_idx],
    public_inputs=_take(task.public_inputs, rest) if len(rest) else None,
    public_labels=labels[rest] if len(rest) else None,
  )


def _check_public_size(task: Task, eval_size: int) -> None:
  """Refuses a task without public data or with too little of it."""
  if task.public_labels is None:
    raise ValueError(
      "public_proxy needs public data: set config.public (for example "
      "'amazon+tweets' for vader_minilm)."
    )
  n_public, n_train = len(task.public_labels), task.num_train
  if n_train + eval_size > n_public:
    raise ValueError(
      f"public_proxy needs {n_train} public training examples (as many as "
      f"the private training set) and {eval_size} evaluation examples, but "
      f"the public set has {n_public}; lower validation_size or raise "
      "public_size."
    )
