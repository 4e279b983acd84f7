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
import jax.numpy as jnp
from jax.extend import core as jax_core

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


# On one device, a dense kernel of at least DOT_BLOCK_MIN_ELEMENTS, read
# only by one ``x @ W`` (a ``dot_general`` contracting its first axis), is
# perturbed block by block of rows inside that product: blocks of at most
# DOT_BLOCK_ELEMENTS (1 MiB of float32). Not with several devices: there the
# kernel may be sharded (FSDP), and XLA would gather a row block's whole
# kernel onto every device (8 devices, wide MLP: 3.7 -> 22.4 MiB each).
DOT_BLOCK_MIN_ELEMENTS = 2**20
DOT_BLOCK_ELEMENTS = 2**18
_MAX_DOT_BLOCKS = 64


def _is_pending(v, pending) -> bool:
  return not isinstance(v, jax_core.Literal) and v in pending


def _dot_rows_per_block(eqn, pending, leaves, uses):
  """``(i, rows per block)`` for the blockwise ``x @ (W + l U)`` of
  ``eqn``, or ``None`` where it does not apply: ``W`` an unperturbed
  float32 matrix leaf ``i``, the product's right operand (the left one not
  a leaf), contracted over its first axis with no batch axes, read nowhere
  else, on one device."""
  if (
    eqn.primitive.name != "dot_general"
    or not _is_pending(eqn.invars[1], pending)
    or _is_pending(eqn.invars[0], pending)
    or uses[eqn.invars[1]] != 1
    or jax.device_count() != 1
  ):
    return None
  i = pending[eqn.invars[1]]
  leaf = leaves[i]
  (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params[
    "dimension_numbers"
  ]
  lhs = eqn.invars[0].aval
  if (
    leaf.ndim != 2
    or leaf.dtype != jnp.float32
    or lhs.dtype != jnp.float32
    or tuple(rhs_contract) != (0,)
    or len(lhs_contract) != 1
    or lhs_batch
    or rhs_batch
    or eqn.params.get("preferred_element_type") not in (None, jnp.float32)
    or leaf.size < DOT_BLOCK_MIN_ELEMENTS
  ):
    return None
  rows, cols = leaf.shape
  most = max(1, DOT_BLOCK_ELEMENTS // cols)
  block = max(r for r in range(1, min(rows, most) + 1) if rows % r == 0)
  return (i, block) if rows // block <= _MAX_DOT_BLOCKS else None


def _blockwise_perturbed_dot(eqn, lhs, leaf, i, perturb_leaf, after, block):
  """``dot_general(lhs, W + l U)`` as a sum over blocks of ``block`` rows of
  ``W``: each block of ``W + l U`` (``perturb_leaf(i, rows, after,
  start=...)``) lives only inside its product, so no perturbed copy of the
  kernel is formed (the sum runs in another order: float rounding)."""
  (lhs_contract,), _ = eqn.params["dimension_numbers"][0]
  lhs = jnp.moveaxis(lhs, lhs_contract, -1)
  cols = leaf.shape[1]
  params = dict(eqn.params)
  params["dimension_numbers"] = (((lhs.ndim - 1,), (0,)), ((), ()))

  def product(j):
    first = j * block
    rows = jax.lax.dynamic_slice_in_dim(leaf, first, block, 0)
    rows = perturb_leaf(i, rows, after, start=first * cols)
    x = jax.lax.dynamic_slice_in_dim(lhs, first, block, lhs.ndim - 1)
    return eqn.primitive.bind(x, rows, **params)

  # The first block's product starts the sum: a buffer of its own that the
  # loop adds into in place. A zeros start would be one constant shared by
  # the loops of both passes, and each loop would copy it first (wide MLP,
  # batch 256: a compiled peak of 24.6 MiB against 28.5).
  return jax.lax.fori_loop(
    1, leaf.shape[0] // block, lambda j, total: total + product(j), product(0)
  )


def loss_perturbed_at_first_use(
  loss: BatchedLoss, params, batch, perturb_leaf: Callable, after=()
) -> jax.Array:
  """``loss(x + l u, batch)`` with each leaf of ``x + l u`` formed just
  before the loss first uses it (MeZO's layer-by-layer perturbation, for
  any loss written in JAX).

  ``perturb_leaf(i, leaf, after)`` returns flattened leaf ``i`` perturbed,
  computed after the values ``after`` (it draws its ``u`` from a key made
  with :func:`~zoprivacy.directions.key_after`). The loss's jaxpr is
  evaluated equation by equation; at an equation that reads parameter
  leaves still unperturbed, those leaves are perturbed after the outputs of
  the previous equation that read parameters. Each perturbed leaf then
  lives from just before its first use to its last, so one layer's copy is
  live rather than the whole perturbed tree. The values are those of
  ``loss(perturb(params, u, l), batch)``: the same operations, which XLA
  may fuse differently (float rounding only).
  Leaves read first inside a nested call (a ``jax.jit`` within the loss)
  are perturbed before that call. A large dense kernel read only by one
  ``x @ W`` is perturbed block by block inside that product
  (:data:`DOT_BLOCK_MIN_ELEMENTS`), so not even its copy is formed:
  ``perturb_leaf(i, rows, after, start=s)`` then perturbs the rows of leaf
  ``i`` from flat element ``s`` on.
  """
  leaves, treedef = jax.tree.flatten(params)
  batch_leaves, batch_def = jax.tree.flatten(batch)

  def flat_loss(leaf_values, batch_values):
    return loss(
      treedef.unflatten(leaf_values), batch_def.unflatten(batch_values)
    )

  closed, out_shape = jax.make_jaxpr(flat_loss, return_shape=True)(
    leaves, batch_leaves
  )
  jaxpr = closed.jaxpr
  env = dict(zip(jaxpr.constvars, closed.consts))
  env.update(zip(jaxpr.invars[len(leaves) :], batch_leaves))
  pending = dict(zip(jaxpr.invars[: len(leaves)], range(len(leaves))))
  uses = {v: 0 for v in pending}
  for v in [v for eqn in jaxpr.eqns for v in eqn.invars] + list(jaxpr.outvars):
    if _is_pending(v, uses):
      uses[v] += 1

  def read(v):
    return v.val if isinstance(v, jax_core.Literal) else env[v]

  def perturb_pending(variables, after):
    for v in variables:
      if _is_pending(v, pending):
        i = pending.pop(v)
        env[v] = perturb_leaf(i, leaves[i], after)

  for eqn in jaxpr.eqns:
    reads_params = any(_is_pending(v, pending) for v in eqn.invars)
    blocked = _dot_rows_per_block(eqn, pending, leaves, uses)
    if blocked is not None:  # x @ W, with W perturbed in blocks inside it
      i, block = blocked
      del pending[eqn.invars[1]]
      out = _blockwise_perturbed_dot(
        eqn, read(eqn.invars[0]), leaves[i], i, perturb_leaf, after, block
      )
      env[eqn.outvars[0]] = out
      after = [out]
      continue
    perturb_pending(eqn.invars, after)
    bind_params = eqn.primitive.get_bind_params(eqn.params)
    subfuns = []
    if isinstance(bind_params, tuple):  # jax < 0.7: (subfuns, params)
      subfuns, bind_params = bind_params
    with eqn.ctx.manager:
      outs = eqn.primitive.bind(*subfuns, *map(read, eqn.invars), **bind_params)
    if not eqn.primitive.multiple_results:
      outs = [outs]
    env.update(zip(eqn.outvars, outs))  # as jax's eval_jaxpr (DropVars too)
    floats = [o for o in outs if jnp.issubdtype(o.dtype, jnp.floating)]
    if reads_params and floats:
      after = floats
  perturb_pending(jaxpr.outvars, after)
  return jax.tree.unflatten(
    jax.tree.structure(out_shape), [read(v) for v in jaxpr.outvars]
  )


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
