"""The runner's step as a program: compiled on abstract parameters.

The memory tables (``benchmarks/llm_memory.py``, ``llm_memory_bf16.py``)
measure what a run runs, not a copy of it: :func:`lowered` resolves a config
as :func:`experiments.run.resolved_run.setup` does (the preflight checks,
the learning rate, :func:`~experiments.run.run_setup.resolve`), takes the
run's step body (:func:`~experiments.run.step.step_body`), jits it as
:func:`~experiments.run.step.make_step` does (the same donation and the same
training-signal outputs) and lowers it on ``jax.ShapeDtypeStruct``
arguments shaped like the run's: the task's trainable and frozen
parameters, the optimizer state its ``init`` builds, a padded batch of
``rows`` training examples and the step's exact noise. Nothing is allocated
and no secret is drawn (the state's noise keys are bound to a fixed
placeholder secret: their shapes are all that is used), so a task built on
abstract weights (:func:`experiments.tasks.llm.task_with_model`) compiles
at any model size. One device: the placement's sharding is not applied.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from experiments.run import preflight
from experiments.run.optimizers import with_learning_rate
from experiments.run.placement import Placement
from experiments.run.run_setup import init_optimizer_state, resolve
from experiments.run.step import jit_step, step_body
from zoprivacy.data import sampling

_PLACEHOLDER_SECRET = bytes(32)  # shapes only: no run is keyed by it


def _shapes(tree):
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)


def lowered(config, task, rows: int):
  """The run's one step for ``config`` and ``task`` (built), lowered on
  abstract arguments with a batch of ``rows`` examples:
  ``lowered(...).compile().memory_analysis()`` is its compiled memory."""
  spec = preflight.validate(config)
  config, _ = with_learning_rate(config, spec)
  resolved = resolve(config, task.num_train, spec=spec)
  init, body = step_body(
    config, spec, resolved, task, Placement.from_config(config)
  )
  trainable, frozen = _shapes(task.init(jax.random.key(config.seed)))
  opt_state = jax.eval_shape(
    lambda p: init_optimizer_state(init, p, _PLACEHOLDER_SECRET), trainable
  )
  examples = jax.tree.map(
    lambda a: jax.ShapeDtypeStruct((rows, *a.shape[1:]), a.dtype),
    (task.train_inputs, task.train_labels),
  )
  batch = sampling.PaddedBatch(
    examples, jax.ShapeDtypeStruct((rows,), jnp.bool_)
  )
  plan = resolved.plan
  noise = None
  if plan is not None and plan.noise_kind == "discrete":
    noise = jax.ShapeDtypeStruct((plan.num_queries,), jnp.int32)
  return jit_step(body, config, spec).lower(
    trainable, frozen, opt_state, batch, None, noise
  )
