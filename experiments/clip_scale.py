r"""The scale of per-example finite differences on public data, for choosing
a zeroth-order clipping norm without reading private data.

  python -m experiments.clip_scale \
      --config configs/vader_minilm_dpzero_lora.py \
      --config.public=amazon+tweets --batches 10 --batch_size 32

At the run's initial parameters (``config.seed``, as the runner initialises
them), for ``batches`` public batches of ``batch_size`` examples and one
public direction each (``estimator_kwargs.directions``, drawn from
``config.seed``), prints the quantiles of the per-example two-point
differences ``|L_i(x + l u) - L_i(x - l u)| / (2 l)`` (DPZero eq. (2), the
scalar the estimators clip at ``clip``). Only public examples are read, so
a clipping norm chosen from these numbers costs no privacy. The scale moves
during training; this is the usual starting point (a norm near the upper
quantiles clips few examples at the start).
"""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from experiments import tasks
from experiments.run import cli
from zoprivacy.zo import directions, queries

QUANTILES = (0.5, 0.75, 0.9, 0.99)


def finite_differences(
  task, config, num_batches: int, batch_size: int
) -> np.ndarray:
  """``|L_i(x + l u) - L_i(x - l u)| / (2 l)`` for ``num_batches *
  batch_size`` public examples at the initial parameters, one direction
  per batch (float64 on the host)."""
  if task.public_labels is None or len(task.public_labels) == 0:
    raise ValueError(
      "The task has no public data (set --config.public=...); the scale of "
      "the finite differences is measured on public examples only."
    )
  available = len(task.public_labels)
  if num_batches * batch_size > available:
    raise ValueError(
      f"{num_batches} batches of {batch_size} need "
      f"{num_batches * batch_size} public examples; the task has "
      f"{available}."
    )
  kwargs = config.estimator_kwargs
  smoothing = float(kwargs.get("smoothing", 1e-3))
  sampler = directions.get_sampler(
    kwargs.get("directions", "gaussian"),
    prng=kwargs.get("direction_prng", "threefry"),
  )
  trainable, frozen = task.init(jax.random.key(config.seed))

  @jax.jit
  def differences(key, inputs, labels):
    u = sampler(key, trainable)
    plus = queries.perturb(trainable, u, smoothing)
    minus = queries.perturb(trainable, u, -smoothing)
    f_plus = task.batched_loss(plus, frozen, (inputs, labels))
    f_minus = task.batched_loss(minus, frozen, (inputs, labels))
    return jnp.abs(f_plus - f_minus) / (2.0 * smoothing)

  order = np.random.default_rng(config.seed).permutation(available)
  keys = jax.random.split(jax.random.key(config.seed), num_batches)
  out = []
  for b in range(num_batches):
    idx = order[b * batch_size : (b + 1) * batch_size]
    inputs = jax.tree.map(lambda x, i=idx: x[i], task.public_inputs)
    out.append(differences(keys[b], inputs, task.public_labels[idx]))
  return np.concatenate([np.asarray(x, np.float64) for x in out])


def summary(values: np.ndarray) -> dict:
  """Count, mean and :data:`QUANTILES` of ``values``."""
  return {
    "count": int(values.size),
    "mean": float(values.mean()),
    **{f"q{int(q * 100)}": float(np.quantile(values, q)) for q in QUANTILES},
  }


def main(argv) -> None:
  del argv
  config = cli.CONFIG.value
  task = tasks.get_task(config)
  values = finite_differences(
    task, config, flags.FLAGS.batches, flags.FLAGS.batch_size
  )
  print(json.dumps(summary(values), indent=2))


if __name__ == "__main__":
  flags.DEFINE_integer("batches", 10, "public batches (one direction each)")
  flags.DEFINE_integer("batch_size", 32, "examples per public batch")
  sys.argv = cli.split_argv(sys.argv)
  app.run(main)
