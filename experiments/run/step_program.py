"""The runner's step as a program: compiled on abstract parameters.

The memory tables (``benchmarks/llm_memory.py``, ``llm_memory_bf16.py``)
measure what a run runs, not a copy of it: :func:`lowered` resolves a run's
settings (:func:`experiments.run.resolution.resolve`'s) as
:func:`experiments.run.resolved_run.setup` does
(:func:`~experiments.run.run_setup.resolve`), takes the
run's step body (:func:`~experiments.run.step.step_body`), jits it as
:func:`~experiments.run.step.make_step` does (the same donation and the same
training-signal outputs) and lowers it on ``jax.ShapeDtypeStruct``
arguments shaped like the run's: the task's trainable and frozen
parameters, the optimizer state its ``init`` builds, a padded batch of
``rows`` training examples and the step's exact noise. Nothing is allocated
and no secret is drawn (the state's noise keys are bound to a fixed
placeholder secret: their shapes are all that is used), so a task built on
abstract weights (:func:`experiments.tasks.llm.task_with_model`) compiles
at any model size. On a mesh (``config.mesh`` over several devices) the
arguments carry the run's placement (:class:`~experiments.run.placement.
Placement`): the parameters and the optimizer state sharded FSDP-style on
``fsdp``, the batch and its mask split over ``data`` x ``fsdp``, the noise
replicated; the compiled peak is then per device.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from experiments.run import batches
from experiments.run.placement import Placement
from experiments.run.run_setup import init_optimizer_state, resolve
from experiments.run.settings import Settings
from experiments.run.step import jit_step, step_body
from zoprivacy.core import sharding
from zoprivacy.data import sampling

_PLACEHOLDER_SECRET = bytes(32)  # shapes only: no run is keyed by it


def _shapes(tree, shardings=None):
  """``tree``'s shapes, each placed on its leaf of ``shardings`` (a tree
  like ``tree``; None: unplaced)."""
  if shardings is None:
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)
  return jax.tree.map(
    lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
    tree,
    shardings,
  )


def _placed(placement: Placement, trainable, frozen, opt_state, batch, noise):
  """The abstract arguments placed as a run places them (unchanged on one
  device)."""
  if placement.num_devices == 1:
    return trainable, frozen, opt_state, batch, noise
  on_params = lambda tree: _shapes(tree, placement.param_shardings(tree))
  every = lambda tree, s: _shapes(tree, jax.tree.map(lambda _: s, tree))
  replicated = jax.sharding.NamedSharding(
    placement.mesh, jax.sharding.PartitionSpec()
  )
  return (
    on_params(trainable),
    on_params(frozen),
    on_params(opt_state),
    every(batch, sharding.data_sharding(placement.mesh)),
    None if noise is None else every(noise, replicated),
  )


def lowered(settings: Settings, spec, task, rows: int):
  """The run's one step for ``settings`` and ``spec``
  (:func:`experiments.run.resolution.resolve`'s) and ``task`` (built),
  lowered on abstract arguments with a batch of ``rows`` examples (padded
  to a multiple of the batch-sharded devices and to whole physical chunks,
  as a run pads it):
  ``lowered(...).compile().memory_analysis()`` is its compiled memory."""
  settings = settings.for_dataset(task.num_train)
  resolved = resolve(settings, spec=spec)
  placement = Placement.of(settings)
  init, body = step_body(settings, spec, resolved, task, placement)
  multiple = placement.row_multiple(rows)  # as a run pads it
  rows = -(-rows // multiple) * multiple
  trainable, frozen = _shapes(task.init(jax.random.key(settings.seed)))
  opt_state = jax.eval_shape(
    lambda p: init_optimizer_state(init, p, _PLACEHOLDER_SECRET), trainable
  )
  examples = jax.tree.map(
    lambda a: jax.ShapeDtypeStruct((rows, *a.shape[1:]), a.dtype),
    (task.train_inputs, task.train_labels),
  )
  batch = sampling.Batch(  # as the run's sampler draws it
    examples,
    jax.ShapeDtypeStruct((rows,), jnp.bool_),
    batches.selection_of(settings),
  )
  plan = resolved.plan
  noise = None
  if plan is not None and plan.noise_kind == "discrete":
    noise = jax.ShapeDtypeStruct((plan.num_queries,), jnp.int32)
  trainable, frozen, opt_state, batch, noise = _placed(
    placement, trainable, frozen, opt_state, batch, noise
  )
  return jit_step(body, settings, spec).lower(
    trainable, frozen, opt_state, batch, None, noise
  )
