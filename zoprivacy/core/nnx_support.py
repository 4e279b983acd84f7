"""Flax NNX models with the zoprivacy estimators.

An estimator perturbs the trainable parameters and evaluates the loss at
``x +- l u``, so it needs the loss as a pure function of the parameter state.
:func:`batched_loss` builds it from an NNX module: the module is split once
into its trainable state (``wrt``, ``nnx.Param`` by default) and everything
else (frozen), and every loss evaluation merges a perturbed trainable state
with the frozen one. The estimators then work with ``nnx.Optimizer``::

    optimizer = nnx.Optimizer(model, optax.chain(est, optax.sgd(0.01)),
                              wrt=nnx.Param)
    loss = zoprivacy.core.nnx_support.batched_loss(
        model, lambda m, batch: per_example_loss(m(batch.x), batch.y))

    @nnx.jit
    def step(model, optimizer, batch):
      zeros = jax.tree.map(jnp.zeros_like, nnx.state(model, nnx.Param))
      optimizer.update(model, zeros, batched_loss=loss, batch=batch)

Freezing part of a model is the same split: put the frozen parameters in a
variable type (or filter) outside ``wrt``. See ``docs/freezing.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flax import nnx


def split_trainable(module: nnx.Module, wrt: Any = nnx.Param):
  """``(graphdef, trainable_state, frozen_state)`` of ``module``."""
  return nnx.split(module, wrt, ...)


def batched_loss(
  module: nnx.Module,
  fn: Callable[[nnx.Module, Any], Any],
  wrt: Any = nnx.Param,
):
  """``(trainable_state, batch) -> [B]`` from ``fn(model, batch) -> [B]``.

  ``fn`` must be per-example (entry ``i`` depends only on example ``i``); the
  frozen state is captured when this is called.
  """
  graphdef, _, frozen = split_trainable(module, wrt)

  def loss(trainable, batch):
    return fn(nnx.merge(graphdef, trainable, frozen), batch)

  return loss
