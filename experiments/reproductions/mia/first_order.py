"""Plain first-order SGD, the clearly overfit non-private reference point.

The project's training loop runs registered estimators only, and a
non-private first-order estimator is not one of them (DP-SGD needs a
positive noise multiplier). This is the shortest loop that gives the
textbook baseline: mini-batch SGD, ``theta <- theta - eta grad((1/B)
sum_{i in batch} loss_i)``, on a seeded reshuffle of the training set every
epoch, on the same task object (data, model, per-example loss) as the
zeroth-order runs. It is an evaluation run: not private, no noise.
"""

from __future__ import annotations

import jax
import numpy as np
import optax

from experiments import tasks
from experiments.run import metrics as metrics_lib


def train_sgd(
  task: tasks.Task,
  *,
  seed: int,
  num_steps: int,
  batch_size: int,
  learning_rate: float,
) -> tuple[object, float]:
  """``(final params, test accuracy)`` after ``num_steps`` SGD steps."""
  params, frozen = task.init(jax.random.key(seed))
  tx = optax.sgd(learning_rate)
  opt_state = tx.init(params)

  def mean_loss(p, x, y):
    return task.batched_loss(p, frozen, (x, y)).mean()

  @jax.jit
  def step(p, s, x, y):
    grads = jax.grad(mean_loss)(p, x, y)
    updates, s = tx.update(grads, s, p)
    return optax.apply_updates(p, updates), s

  n = task.num_train
  batch_size = min(batch_size, n)
  per_epoch = n // batch_size  # drop the last partial batch: one shape
  rng = np.random.default_rng([seed, 5])
  order = rng.permutation(n)
  for t in range(num_steps):
    k = t % per_epoch
    if t and k == 0:
      order = rng.permutation(n)
    rows = order[k * batch_size : (k + 1) * batch_size]
    params, opt_state = step(
      params, opt_state, task.train_inputs[rows], task.train_labels[rows]
    )
  accuracy = metrics_lib.evaluate(
    jax.jit(task.apply), params, frozen, task.test_inputs, task.test_labels
  )
  return params, accuracy
