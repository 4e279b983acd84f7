"""Per-example loss queries at perturbed parameters.

A zeroth-order step only ever *evaluates* the user's loss. Two forms of loss
are accepted (keyword names say which):

* ``per_example_loss(params, example) -> scalar``: the loss of one example;
  zoprivacy maps it over the batch with ``jax.vmap``.
* ``batched_loss(params, batch) -> [B]``: already returns one loss per example
  (e.g. a model that handles its own batching). It must not mix examples
  (no batch norm): each output may depend on its own example only.

``batch`` is any pytree whose leaves share a leading batch axis ``B``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

PerExampleLoss = Callable[[Any, Any], jax.Array]
BatchedLoss = Callable[[Any, Any], jax.Array]


def as_batched_loss(
  per_example_loss: PerExampleLoss | None = None,
  batched_loss: BatchedLoss | None = None,
) -> BatchedLoss:
  """Returns ``loss(params, batch) -> [B]`` from exactly one of the two forms."""
  if (per_example_loss is None) == (batched_loss is None):
    raise ValueError(
      "Pass exactly one of per_example_loss=(params, example) -> scalar or "
      "batched_loss=(params, batch) -> [B] as a keyword extra argument."
    )
  if batched_loss is not None:
    return batched_loss
  return jax.vmap(per_example_loss, in_axes=(None, 0))


def as_per_example_loss(
  per_example_loss: PerExampleLoss | None = None,
  batched_loss: BatchedLoss | None = None,
) -> PerExampleLoss:
  """Returns ``loss(params, example) -> scalar`` from either form.

  A batched loss is evaluated on a batch of one (needed by first-order
  baselines, which differentiate each example's loss separately).
  """
  if (per_example_loss is None) == (batched_loss is None):
    raise ValueError(
      "Pass exactly one of per_example_loss=... or batched_loss=... ."
    )
  if per_example_loss is not None:
    return per_example_loss

  def single(params, example):
    one = jax.tree.map(lambda x: x[None], example)
    return batched_loss(params, one)[0]

  return single


def perturb(params, direction, scale):
  """``params + scale * direction`` leaf-wise, in each leaf's dtype.

  MeZO / DP-ZO Alg. 2 "PerturbParameters"; with ``scale = +-lambda`` this is
  ``x +- lambda u`` of DPZero eq. (2).
  """
  return jax.tree.map(
    lambda p, u: p + (scale * u).astype(p.dtype), params, direction
  )


def two_point_losses(
  loss: BatchedLoss, params, direction, smoothing: float, batch
) -> tuple[jax.Array, jax.Array]:
  """Per-example ``f(x + l u; xi_i)`` and ``f(x - l u; xi_i)``, each ``[B]``.

  The two batched forward passes of DPZero eq. (2) / DP-ZO Alg. 1 lines 5-9,
  the whole cost floor of a zeroth-order step.
  """
  f_plus = loss(perturb(params, direction, smoothing), batch)
  f_minus = loss(perturb(params, direction, -smoothing), batch)
  return f_plus, f_minus


def per_example_gradients(args, params, batch=None):
  """``[B, ...]`` gradients of each example's loss (first order: DP-SGD
  Abadi et al. 2016 Alg. 1 line 4, and the public-data baselines).

  ``args`` carries the loss form (``per_example_loss`` or ``batched_loss``)
  and the batch (``batch`` replaces it, e.g. by public data);
  ``jax.vmap(jax.grad(.))`` over the examples.
  """
  loss_one = as_per_example_loss(args.per_example_loss, args.batched_loss)
  batch = args.batch if batch is None else batch
  return jax.vmap(jax.grad(loss_one), in_axes=(None, 0))(params, batch)
