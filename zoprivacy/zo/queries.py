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

from zoprivacy.core import low_precision
from zoprivacy.zo import blockwise_dot

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
  """``params + scale * direction`` leaf-wise, in each leaf's dtype, except
  16-bit float leaves: their points are float32
  (:func:`~zoprivacy.core.low_precision.perturbed`; ``l u`` would be
  rounded away in 16 bits).

  MeZO / DP-ZO Alg. 2 "PerturbParameters"; with ``scale = +-lambda`` this is
  ``x +- lambda u`` of DPZero eq. (2).
  """
  return jax.tree.map(
    lambda p, u: low_precision.perturbed(p, scale * u), params, direction
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


def loss_perturbed_at_first_use(
  loss: BatchedLoss, params, batch, perturb_leaf: Callable, after=()
) -> jax.Array:
  """``loss(x + l u, batch)`` with each leaf of ``x + l u`` formed just
  before the loss first uses it: :func:`losses_perturbed_at_first_use`
  with one pass, ``perturb_leaf(i, leaf, after, start=0)`` returning flat
  leaf ``i`` (or its rows from flat element ``start`` on) perturbed:
  ``leaf + d``, for a ``d`` that does not depend on ``leaf``."""
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
  :func:`~zoprivacy.zo.directions.key_after`, for all of them). A leaf is
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
  (:mod:`zoprivacy.zo.blockwise_dot`), one draw of each block for all
  passes, so not even its copies are formed: there ``perturb_lanes(i,
  zeros, after, (0,), start=s)`` gives the first point's perturbation
  ``l u`` of the rows of leaf ``i`` from flat element ``s`` on, and the
  second point's is its negation (the points are ``x + l u`` and
  ``x - l u``, as in every two-point step).
  """
  leaves = jax.tree.leaves(params)
  # Traced at the points' dtypes: a 16-bit leaf's copies are float32.
  closed, out_shape = _trace(loss, _point_shapes(params), batch)
  evaluation = _FirstUseEvaluation(
    closed, leaves, jax.tree.leaves(batch), perturb_lanes, passes
  )
  for eqn in closed.jaxpr.eqns:
    after = evaluation.run(eqn, after)
  evaluation.perturb_pending(closed.jaxpr.outvars, after)
  out_tree = jax.tree.structure(out_shape)
  return tuple(
    jax.tree.unflatten(out_tree, evaluation.outputs(k)) for k in range(passes)
  )


def _point_shapes(params):
  """``params`` with each 16-bit float leaf replaced by a float32 shape:
  the dtype of its perturbed copies (:func:`perturb`)."""
  return jax.tree.map(
    lambda x: (
      jax.ShapeDtypeStruct(jnp.shape(x), jnp.float32)
      if low_precision.is_narrow(x)
      else x
    ),
    params,
  )


def _trace(loss: BatchedLoss, params, batch):
  """``(closed jaxpr, output shape)`` of ``loss`` over the flat leaves of
  ``params`` then of ``batch``."""
  treedef = jax.tree.structure(params)
  batch_def = jax.tree.structure(batch)

  def flat_loss(leaf_values, batch_values):
    return loss(
      treedef.unflatten(leaf_values), batch_def.unflatten(batch_values)
    )

  return jax.make_jaxpr(flat_loss, return_shape=True)(
    jax.tree.leaves(params), jax.tree.leaves(batch)
  )


class _FirstUseEvaluation:
  """The state of :func:`losses_perturbed_at_first_use`'s walk over the
  loss's equations: the values so far (``env``) and the parameter leaves
  not yet perturbed (``pending``, variable -> leaf number)."""

  def __init__(self, closed, leaves, batch_leaves, perturb_lanes, passes):
    jaxpr = closed.jaxpr
    self.leaves, self.perturb_lanes, self.passes = leaves, perturb_lanes, passes
    self.outvars = jaxpr.outvars
    self.env = dict(zip(jaxpr.constvars, closed.consts))
    self.env.update(zip(jaxpr.invars[len(leaves) :], batch_leaves))
    self.pending = dict(zip(jaxpr.invars[: len(leaves)], range(len(leaves))))
    self.uses = {v: 0 for v in self.pending}
    read = [v for eqn in jaxpr.eqns for v in eqn.invars] + list(self.outvars)
    for v in read:
      if blockwise_dot.is_pending(v, self.uses):
        self.uses[v] += 1

  def read(self, v):
    return v.val if isinstance(v, jax_core.Literal) else self.env[v]

  def outputs(self, k):
    return [blockwise_dot.lane(self.read(v), k) for v in self.outvars]

  def perturb_pending(self, variables, after):
    """Perturbs the leaves among ``variables`` still pending, all passes
    at once (a parameter the loss returns)."""
    for v in variables:
      if blockwise_dot.is_pending(v, self.pending):
        i = self.pending.pop(v)
        self.env[v] = blockwise_dot.Lanes(
          self._perturbed(v, i, after, range(self.passes))
        )

  def _perturbed(self, v, i, after, lanes):
    """``perturb_lanes`` of leaf ``i`` (variable ``v``), in the dtype the
    loss was traced with (float32 for a 16-bit leaf: a copy returned in
    16 bits is widened exactly)."""
    copies = self.perturb_lanes(i, self.leaves[i], after, lanes)
    return [jnp.asarray(c).astype(v.aval.dtype) for c in copies]

  def run(self, eqn, after):
    """Evaluates ``eqn`` (per pass where it reads a perturbed value);
    returns the values the next perturbation is drawn after."""
    out = self._blockwise_dot(eqn, after)
    if out is not None:
      self.env[eqn.outvars[0]] = out
      return list(out)
    fresh = []
    for v in eqn.invars:
      if blockwise_dot.is_pending(v, self.pending) and v not in fresh:
        fresh.append(v)
    if not fresh:
      values = [self.read(v) for v in eqn.invars]
      outs = _bind_per_pass(eqn, values, self.passes)
      self.env.update(zip(eqn.outvars, outs))  # as eval_jaxpr (DropVars too)
      return after
    return self._run_with_fresh_leaves(eqn, fresh, after)

  def _blockwise_dot(self, eqn, after):
    """The passes' outputs of ``x @ W`` for a kernel perturbed block by
    block inside the product (:mod:`zoprivacy.zo.blockwise_dot`), or
    ``None`` where the product does not qualify."""
    lhs = eqn.invars[0] if eqn.primitive.name == "dot_general" else None
    shared = (
      self.passes == 2
      and lhs is not None
      and not blockwise_dot.is_pending(lhs, self.pending)
      and not isinstance(self.read(lhs), blockwise_dot.Lanes)
    )
    blocked = blockwise_dot.dot_rows_per_block(
      eqn, self.pending, self.leaves, self.uses, self.passes, shared
    )
    if blocked is None:
      return None
    i, block = blocked
    del self.pending[eqn.invars[1]]
    if shared:  # x @ W +- x @ (l U): one plain product, no perturbed copy
      return blockwise_dot.shared_input_dot(
        eqn, self.read(lhs), self.leaves[i], i, self.perturb_lanes, after, block
      )
    return blockwise_dot.blockwise_perturbed_dot(
      eqn,
      self.read(lhs),
      self.leaves[i],
      i,
      self.perturb_lanes,
      after,
      block,
      self.passes,
    )

  def _run_with_fresh_leaves(self, eqn, fresh, after):
    """``eqn`` once per pass, the pass-``k`` copy of each ``fresh`` leaf
    formed after pass ``k - 1``'s outputs of this equation, so one copy is
    live where the equation is its last use."""
    copies = {v: [] for v in fresh}
    per_pass = []
    for k in range(self.passes):
      for v in fresh:
        i = self.pending[v]
        copies[v] += self._perturbed(v, i, after, (k,))
      values = [
        copies[v][k] if v in copies else blockwise_dot.lane(self.read(v), k)
        for v in eqn.invars
      ]
      per_pass.append(_bind(eqn, values))
      floats = [
        o for o in per_pass[-1] if jnp.issubdtype(o.dtype, jnp.floating)
      ]
      after = floats or after
    for v in fresh:
      del self.pending[v]
      self.env[v] = blockwise_dot.Lanes(copies[v])
    outs = [blockwise_dot.Lanes(o) for o in zip(*per_pass)]
    self.env.update(zip(eqn.outvars, outs))
    return after


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
  if not any(isinstance(x, blockwise_dot.Lanes) for x in values):
    return _bind(eqn, values)
  per_pass = [
    _bind(eqn, [blockwise_dot.lane(x, k) for x in values])
    for k in range(passes)
  ]
  return [blockwise_dot.Lanes(outs) for outs in zip(*per_pass)]


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
