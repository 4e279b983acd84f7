"""``nnx.Optimizer`` with its state checked as :func:`zoprivacy.init` checks
it: the Flax NNX road to a private estimator.

``nnx.Optimizer(model, tx, wrt=...)`` makes its state with ``tx.init``
alone, which a private estimator refuses to release from
(:mod:`zoprivacy.estimators.composition`). :func:`optimizer` builds the
same ``nnx.Optimizer`` with its state made by :func:`zoprivacy.init`::

    optimizer = zoprivacy.training.nnx_optimizer.optimizer(
        model, optax.chain(zoprivacy.dpzero(privacy), optax.sgd(1e-2)),
        wrt=nnx.Param)
    loss = zoprivacy.core.nnx_support.batched_loss(model, per_example_fn)

    @nnx.jit
    def step(model, optimizer, batch):
      zeros = jax.tree.map(jnp.zeros_like, nnx.state(model, nnx.Param))
      optimizer.update(model, zeros, batched_loss=loss, batch=batch)
"""

from __future__ import annotations

import functools

import optax
from flax import nnx

from zoprivacy.training import training_step


def optimizer(model, tx: optax.GradientTransformation, *, wrt=nnx.Param):
  """``nnx.Optimizer(model, tx, wrt=wrt)`` whose state is
  ``zoprivacy.init(tx, params)``: the composition checked before any
  release (``tx`` is the whole transformation its ``update`` calls)."""
  checked = optax.GradientTransformationExtraArgs(
    functools.partial(training_step.init, tx), tx.update
  )
  return nnx.Optimizer(model, checked, wrt=wrt)
