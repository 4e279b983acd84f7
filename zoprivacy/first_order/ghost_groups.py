"""Ghost clipping's layer rules: each layer group's per-example norm parts
and its clipped sum, from the layer's inputs and output gradients.

Rules (:mod:`~zoprivacy.first_order.ghost_clipping`'s docstring): a dense
layer's ghost norm (Li et al. 2022 eq. (4)) or, where ``T^2 > d_in d_out``,
its per-example kernel; an embedding's ghost norm over token ids; any other
supported layer's own per-example gradient by a local ``vjp``. Each returns
``(parts, clipped_sum)``: the parts of the per-example squared norms
(:class:`~zoprivacy.first_order.ghost_certified.Part`, with what bounds
their float error) and ``clipped_sum(factor) -> {leaf index: sum_i
factor_i grad_i}``.

A group inside a stack of ``L`` layers (:func:`stacked`: inputs and output
gradients ``[L, B, ...]``, parameters ``[L, ...]``) applies the same rule
to each layer in turn (``lax.map``: one layer's Gram matrices at a time),
each layer a part of its own: the per-example norm sums over the ``L``
layers, and the clipped sum is the ``[L, ...]`` stack of the layers' sums.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoprivacy.first_order import ghost_certified as certified
from zoprivacy.first_order import power_scaling

_HIGHEST = jax.lax.Precision.HIGHEST


def _rows(x, keep):
  """Zeroes (``where``, NaN-safe) the examples with ``keep`` False."""
  return jnp.where(keep.reshape((-1,) + (1,) * (x.ndim - 1)), x, 0)


def _wide(x):
  return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def weighted_sum(per_example, factor):
  """``sum_i factor_i x_i`` over rows with ``factor_i > 0`` (NaN-safe)."""
  x = _rows(_wide(per_example), factor > 0)
  return jnp.einsum("b,b...->...", factor, x, precision=_HIGHEST)


def dense(calls, inputs, gs, names, leaves):
  """Ghost norm and clipped sum of a dense layer (Li et al. 2022 eq. (4)).

  ``inputs``: each call's recorded input arrays; ``gs``: each call's
  output gradient; ``leaves[i]``: leaf ``i`` (only its shape is read).
  Returns ``(parts, sum_fn(factor) -> {leaf index: array})``: the parts'
  squared norms add up to the per-example ``||grad_i||^2``, with the
  sizes that bound their float error (:mod:`.ghost_certified`).
  """
  del calls
  xs = [arrays[0] for arrays in inputs]
  d_in, d_out = leaves[names["kernel"]].shape
  batch = xs[0].shape[0]
  x = _wide(jnp.concatenate([a.reshape(batch, -1, d_in) for a in xs], 1))
  g = _wide(jnp.concatenate([b.reshape(batch, -1, d_out) for b in gs], 1))
  positions = x.shape[1]
  bias_grads = jnp.sum(g, axis=1)
  parts = []
  if "bias" in names:
    parts.append(certified.object_part(bias_grads))
  if positions * positions <= d_in * d_out:
    # the norm from factors scaled per example (flushes, .ghost_certified)
    sx = power_scaling.scale(x, certified.FACTOR_LIMIT)
    sg = power_scaling.scale(g, certified.FACTOR_LIMIT)
    xx = jnp.einsum("btd,bsd->bts", sx.values, sx.values, precision=_HIGHEST)
    gg = jnp.einsum("btd,bsd->bts", sg.values, sg.values, precision=_HIGHEST)
    sq = jnp.maximum(jnp.sum(xx * gg, axis=(1, 2)), 0.0)
    parts.append(certified.ghost_part(sq, sx, sg))
    per_example_kernel = None
  else:
    per_example_kernel = jnp.einsum("btd,bte->bde", x, g, precision=_HIGHEST)
    parts.append(certified.object_part(per_example_kernel))

  def clipped_sum(factor):
    if per_example_kernel is None:
      keep = factor > 0
      weighted = _rows(g, keep) * factor[:, None, None]
      kernel_sum = jnp.einsum(
        "btd,bte->de", _rows(x, keep), weighted, precision=_HIGHEST
      )
    else:
      kernel_sum = weighted_sum(per_example_kernel, factor)
    out = {names["kernel"]: kernel_sum}
    if "bias" in names:
      out[names["bias"]] = weighted_sum(bias_grads, factor)
    return out

  return parts, clipped_sum


def embed(calls, inputs, gs, names, leaves):
  """Ghost norm over token ids and clipped sum of an embedding table."""
  del calls
  ids_list = [arrays[0] for arrays in inputs]
  vocab, features = leaves[names["embedding"]].shape
  batch = ids_list[0].shape[0]
  ids = jnp.concatenate([i.reshape(batch, -1) for i in ids_list], axis=1)
  g = _wide(jnp.concatenate([b.reshape(batch, -1, features) for b in gs], 1))
  ids = jnp.where(ids < 0, ids + vocab, ids)  # jnp.take's normalization
  valid = (ids >= 0) & (ids < vocab)  # out of range: no gradient
  same = (ids[:, :, None] == ids[:, None, :]) & valid[:, :, None]
  scaled = power_scaling.scale(g, certified.VALUE_LIMIT)
  v = scaled.values
  gg = jnp.einsum("btd,bsd->bts", v, v, precision=_HIGHEST)
  sq = jnp.sum(jnp.where(same & valid[:, None, :], gg, 0.0), axis=(1, 2))
  sq = jnp.maximum(sq, 0.0)  # a Gram sum: rounding may dip below 0
  one_hot = power_scaling.one_hot(valid)  # ||x_t||: 1 for a valid token, else 0
  part = certified.ghost_part(sq, one_hot, scaled, table=vocab)

  def clipped_sum(factor):
    keep = factor > 0
    weighted = _rows(g, keep) * factor[:, None, None]
    rows = jnp.where(valid, ids, vocab).reshape(-1)
    total = jnp.zeros((vocab, features), g.dtype)
    total = total.at[rows].add(weighted.reshape(-1, features), mode="drop")
    return {names["embedding"]: total}

  return [part], clipped_sum


def local(calls, inputs, gs, names, leaves):
  """Per-example gradients of one module's own parameters by a local vjp of
  the module on each recorded input (chain rule, summed over its calls)."""
  params = {n: leaves[i] for n, i in names.items()}
  per_example = jax.tree.map(lambda p: 0.0, params)
  for call, arrays, g in zip(calls, inputs, gs):

    def local(arrays, g, call=call):
      flat, pos = [], iter(arrays)
      for k in range(call.arg_tree.num_leaves):
        flat.append(call.static[k] if k in call.static else next(pos))
      args, kwargs = jax.tree.unflatten(call.arg_tree, flat)
      apply = lambda p: call.module.apply({"params": p}, *args, **kwargs)
      _, vjp = jax.vjp(apply, params)
      return vjp(g)[0]

    per_example = jax.tree.map(jnp.add, per_example, jax.vmap(local)(arrays, g))
  parts = [object_part(v) for v in per_example.values()]

  def clipped_sum(factor):
    return {names[n]: weighted_sum(v, factor) for n, v in per_example.items()}

  return parts, clipped_sum


def object_part(per_example) -> certified.Part:
  """The part of a gradient formed per example (``[B, ...]``)."""
  return certified.object_part(_wide(per_example))


RULES = {"dense": dense, "embed": embed, "local": local}


def group(calls, inputs, gs, leaves):
  """``(parts, clipped_sum)`` of one layer group's calls (all of one kind,
  module docstring), in a stack of layers or not."""
  rule, names = RULES[calls[0].kind], calls[0].names
  if calls[0].layers:
    return stacked(rule, calls, inputs, gs, names, leaves)
  return rule(calls, inputs, gs, names, leaves)


def stacked(rule, calls, inputs, gs, names, leaves):
  """``rule`` applied to each layer of a stack in turn (module docstring):
  ``inputs`` and ``gs`` hold ``[L, B, ...]`` arrays, ``leaves[i]`` the
  ``[L, ...]`` stacks; each part of a layer becomes a part with a layer
  axis (``[B, L]`` arrays, :mod:`.ghost_certified`)."""
  layers = calls[0].layers
  own = {i: leaves[i] for i in names.values()}
  if rule is local:  # the layer's own parameters, layer by layer
    fixed, scanned = {}, own
  else:  # only the shapes are read
    shape = lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype)
    fixed, scanned = {i: shape(x) for i, x in own.items()}, {}
  static = []

  def one(layer_in):
    inputs_l, gs_l, scanned_l = layer_in
    return rule(calls, inputs_l, gs_l, names, {**fixed, **scanned_l})

  def norms(layer_in):
    parts, _ = one(layer_in)
    static[:] = parts
    return [(p.sq, p.absolute, p.exponent, p.shift, p.ok) for p in parts]

  arrays = jax.lax.map(norms, (inputs, gs, scanned))
  parts = [
    p._replace(
      **{
        field: jnp.swapaxes(a, 0, 1)  # [L, B] -> [B, L]
        for field, a in zip(("sq", "absolute", "exponent", "shift", "ok"), arr)
      },
      sum_floor=p.sum_floor * layers,
    )
    for p, arr in zip(static, arrays)
  ]

  def clipped_sum(factor):
    return jax.lax.map(
      lambda layer_in: one(layer_in)[1](factor), (inputs, gs, scanned)
    )

  return parts, clipped_sum
