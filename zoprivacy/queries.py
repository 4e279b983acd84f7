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
# DOT_BLOCK_ELEMENTS (1 MiB of float32) per pass evaluated side by side (a
# block is drawn once and perturbed for each pass, so two passes take
# blocks of half that and hold what one pass held). Not with several devices: there the
# kernel may be sharded (FSDP), and XLA would gather a row block's whole
# kernel onto every device (8 devices, wide MLP: 3.7 -> 22.4 MiB each).
DOT_BLOCK_MIN_ELEMENTS = 2**20
DOT_BLOCK_ELEMENTS = 2**18
_MAX_DOT_BLOCKS = 64


def _is_pending(v, pending) -> bool:
  return not isinstance(v, jax_core.Literal) and v in pending


def _dot_rows_per_block(eqn, pending, leaves, uses, passes):
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
  most = max(1, DOT_BLOCK_ELEMENTS // passes // cols)
  block = max(r for r in range(1, min(rows, most) + 1) if rows % r == 0)
  return (i, block) if rows // block <= _MAX_DOT_BLOCKS else None


class _Lanes(tuple):
  """One value per pass (``x + l u`` and ``x - l u``) of a value that
  depends on the perturbed parameters; any other value is shared."""


def _lane(value, k):
  return value[k] if isinstance(value, _Lanes) else value


def _blockwise_perturbed_dot(
  eqn, lhs, leaf, i, perturb_lanes, after, block, passes
):
  """``dot_general(lhs, W + l U)`` for each pass as a sum over blocks of
  ``block`` rows of ``W``: each block of every pass's ``W + l U``
  (``perturb_lanes(i, rows, after, start=...)``, one draw of ``U`` for all
  passes) lives only inside its products, so no perturbed copy of the
  kernel is formed (the sum runs in another order: float rounding)."""
  (lhs_contract,), _ = eqn.params["dimension_numbers"][0]
  ndim = jnp.ndim(_lane(lhs, 0))
  moved = [jnp.moveaxis(_lane(lhs, k), lhs_contract, -1) for k in range(passes)]
  cols = leaf.shape[1]
  params = dict(eqn.params)
  params["dimension_numbers"] = (((ndim - 1,), (0,)), ((), ()))

  def products(j):
    first = j * block
    rows = jax.lax.dynamic_slice_in_dim(leaf, first, block, 0)
    lanes = perturb_lanes(i, rows, after, range(passes), start=first * cols)
    return tuple(
      eqn.primitive.bind(
        jax.lax.dynamic_slice_in_dim(moved[k], first, block, ndim - 1),
        rows_k,
        **params,
      )
      for k, rows_k in enumerate(lanes)
    )

  # The first block's products start the sums: buffers of their own that
  # the loop adds into in place. A zeros start would be one constant shared
  # by the loops, and each loop would copy it first (wide MLP, batch 256: a
  # compiled peak of 24.6 MiB against 28.5).
  return _Lanes(
    jax.lax.fori_loop(
      1,
      leaf.shape[0] // block,
      lambda j, totals: tuple(t + p for t, p in zip(totals, products(j))),
      products(0),
    )
  )


def loss_perturbed_at_first_use(
  loss: BatchedLoss, params, batch, perturb_leaf: Callable, after=()
) -> jax.Array:
  """``loss(x + l u, batch)`` with each leaf of ``x + l u`` formed just
  before the loss first uses it: :func:`losses_perturbed_at_first_use`
  with one pass, ``perturb_leaf(i, leaf, after, start=0)`` returning flat
  leaf ``i`` (or its rows from flat element ``start`` on) perturbed."""
  return losses_perturbed_at_first_use(
    loss,
    params,
    batch,
    lambda i, leaf, after, lanes, **start: (
      perturb_leaf(i, leaf, after, **start),
    ),
    after,
    passes=1,
  )[0]


def losses_perturbed_at_first_use(
  loss: BatchedLoss,
  params,
  batch,
  perturb_lanes: Callable,
  after=(),
  *,
  passes: int = 2,
) -> tuple[jax.Array, ...]:
  """``loss`` at ``passes`` perturbations of the parameters (the two
  points ``x + l u`` and ``x - l u``), evaluated side by side, each leaf of
  each perturbation formed just before the loss first uses it (MeZO's
  layer-by-layer perturbation, for any loss written in JAX).

  ``perturb_lanes(i, leaf, after, lanes, start=0)`` returns a perturbed
  copy of flattened leaf ``i`` for each pass in ``lanes``, computed after
  the values ``after`` (it draws its ``u`` once, from a key made with
  :func:`~zoprivacy.directions.key_after`, for all of them). A leaf is
  formed for each pass just before that pass's first use, after the
  previous pass's outputs of the same equation (one copy live where that
  equation is its last use).
  The loss's jaxpr is evaluated equation by equation: an equation that
  reads no perturbed value (the batch's own preprocessing) runs once and is
  shared; one that does runs once per pass. At an equation that reads
  parameter leaves still unperturbed, those leaves are perturbed after the
  outputs of the previous equation that read parameters, so each
  perturbed leaf lives from just before its first use to its last and one
  layer's copies are live rather than whole perturbed trees. The values
  are those of ``loss(perturb(params, u, +-l), batch)``: the same
  operations, which XLA may fuse differently (float rounding only).
  Leaves read first inside a nested call (a ``jax.jit`` within the loss)
  are perturbed before that call. A large dense kernel read only by one
  ``x @ W`` is perturbed block by block inside that product
  (:data:`DOT_BLOCK_MIN_ELEMENTS`), one draw of each block for all
  passes, so not even its copies are formed: ``perturb_lanes(i, rows,
  after, lanes, start=s)`` then perturbs the rows of leaf ``i`` from flat element
  ``s`` on.
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
        env[v] = _Lanes(perturb_lanes(i, leaves[i], after, range(passes)))

  for eqn in jaxpr.eqns:
    blocked = _dot_rows_per_block(eqn, pending, leaves, uses, passes)
    if blocked is not None:  # x @ W, with W perturbed in blocks inside it
      i, block = blocked
      del pending[eqn.invars[1]]
      out = _blockwise_perturbed_dot(
        eqn,
        read(eqn.invars[0]),
        leaves[i],
        i,
        perturb_lanes,
        after,
        block,
        passes,
      )
      env[eqn.outvars[0]] = out
      after = list(out)
      continue
    fresh = []
    for v in eqn.invars:
      if _is_pending(v, pending) and v not in fresh:
        fresh.append(v)
    if not fresh:
      outs = _bind_per_pass(eqn, [read(v) for v in eqn.invars], passes)
      env.update(zip(eqn.outvars, outs))  # as eval_jaxpr (DropVars too)
      continue
    # The pass-k copy of each fresh leaf is formed after pass k-1's
    # outputs of this equation, so one copy is live where the equation is
    # its last use.
    copies = {v: [] for v in fresh}
    per_pass = []
    for k in range(passes):
      for v in fresh:
        i = pending[v]
        copies[v] += perturb_lanes(i, leaves[i], after, (k,))
      values = [
        copies[v][k] if v in copies else _lane(read(v), k) for v in eqn.invars
      ]
      per_pass.append(_bind(eqn, values))
      floats = [
        o for o in per_pass[-1] if jnp.issubdtype(o.dtype, jnp.floating)
      ]
      after = floats or after
    for v in fresh:
      del pending[v]
      env[v] = _Lanes(copies[v])
    env.update(zip(eqn.outvars, [_Lanes(o) for o in zip(*per_pass)]))
  perturb_pending(jaxpr.outvars, after)
  out_tree = jax.tree.structure(out_shape)
  return tuple(
    jax.tree.unflatten(out_tree, [_lane(read(v), k) for v in jaxpr.outvars])
    for k in range(passes)
  )


def _bind(eqn, values):
  """The outputs (a list) of ``eqn`` on ``values``."""
  bind_params = eqn.primitive.get_bind_params(eqn.params)
  subfuns = []
  if isinstance(bind_params, tuple):  # jax < 0.7: (subfuns, params)
    subfuns, bind_params = bind_params
  with eqn.ctx.manager:
    outs = eqn.primitive.bind(*subfuns, *values, **bind_params)
  return outs if eqn.primitive.multiple_results else [outs]


def _bind_per_pass(eqn, values, passes):
  """``eqn`` on ``values``: once if none is per pass, else once per pass
  (outputs per pass)."""
  if not any(isinstance(x, _Lanes) for x in values):
    return _bind(eqn, values)
  per_pass = [_bind(eqn, [_lane(x, k) for x in values]) for k in range(passes)]
  return [_Lanes(outs) for outs in zip(*per_pass)]


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
