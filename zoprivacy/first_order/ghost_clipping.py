"""Ghost clipping: DP-SGD's clipped gradient sum without per-example gradients.

DP-SGD (Abadi et al. 2016, Alg. 1 lines 4-6) needs ``sum_i clip_C(g_i)`` with
``clip_C(g) = g min(1, C / ||g||_2)``. The explicit path materializes every
``g_i`` (``B`` copies of the model). Here the layers that own most parameters
never materialize them (Goodfellow 2015; Li et al. 2022, "Large language
models can be strong differentially private learners", Sec. 4; Bu et al.
2022, "book-keeping"). For a dense layer ``y_t = x_t W + b`` applied at the
positions ``t`` of one example (all leading axes of its input), with
``g_t = dL_i / dy_t``:

* ``||dL_i/dW||_F^2 = sum_{t,s} <x_t, x_s> <g_t, g_s>`` (Li et al. eq. (4),
  the ghost norm; used when ``T^2 <= d_in d_out``, otherwise that layer's
  per-example ``sum_t x_t g_t^T`` is formed), ``dL_i/db = sum_t g_t``;
* embeddings ``y_t = E[id_t]``:
  ``||dL_i/dE||^2 = sum_{t,s} [id_t = id_s] <g_t, g_s>``;
* the clipped sum is then read off the same activations and output
  gradients (book-keeping): ``sum_i c_i sum_t x_it g_it^T`` with
  ``c_i = min(1, C / ||g_i||)``, so there is no second backward pass.

How it works: the per-example loss runs under :func:`flax.linen.
intercept_methods`; each supported layer call records its input and gets a
zero tensor ``z`` added to its output, and one ``vmap(grad)`` w.r.t. the
``z``'s gives every per-example output gradient ``g_it``.

Supported structures (flax linen modules called inside the loss, with the
parameters handed to them unchanged, i.e. the very leaves of ``params``):

* ``nn.Dense`` (default ``dot_general``/``promote_dtype``): ghost norm;
* ``nn.Embed`` (``num_embeddings > 1``): ghost norm over token ids;
* ``nn.Conv``, ``nn.LayerNorm``, ``nn.RMSNorm`` and non-standard ``nn.Dense``
  / ``nn.Embed``: per-example gradients of *that layer only*, by a local
  ``vjp`` of the module on its recorded input (small for norms; ``B`` copies
  of a conv kernel).

Layer stacks: the same layers inside a stack of ``L`` layers stacked on a
leading axis, run through :func:`zoprivacy.first_order.layer_stack.scan`
(the ``nn.scan`` decoder stacks of the OPT and Llama/Mistral models, by
:func:`zoprivacy.models.stacked_layers.scan_layers`), get the same rules
layer by layer: their inputs and output gradients come out of the scan as
``[L, B, ...]`` arrays, the per-example squared norm sums over the ``L``
layers (each layer its own part of the certified norm) and the clipped sum
of an ``[L, ...]`` leaf is the stack of its layers' sums
(:mod:`~zoprivacy.first_order.ghost_groups`). The stack's backward pass
keeps each layer's products, not a copy of its parameter slices.

This covers :class:`~zoprivacy.models.small.MLP`, ``SmallCNN``, every
Dense/Embed/LayerNorm/patch-Conv of the BERT and ViT encoders and every
Dense and LayerNorm of the causal LMs' decoder layers. Every other
parameter falls back to explicit per-example gradients (computed in the same
backward pass, for those leaves only): parameters declared directly in a
non-leaf module (ViT's ``cls_token``, ``pos_embedding``, Llama's RMSNorm
scales), layers inside a lifted or nested transform not run as a stack
above (``nn.scan``/``nn.RNN`` as in the LSTM, ``nn.remat``, a ``jax.jit``
or ``vmap`` inside the loss), parameters
transformed before ``apply`` (a LoRA merge, a dtype cast), tied weights read
outside their module's ``__call__`` (``Embed.attend``, the causal LMs' tied
or chunked LM heads). The fallback is
decided at trace time by a dependency check on the loss's jaxpr: a layer is
ghost-clipped only if the loss depends on its parameters through its
intercepted calls alone, so a parameter that is also used elsewhere (a
regularizer inside the loss) is never under-counted in the norm. A fallback
is said once per trace (a :class:`~zoprivacy.first_order.ghost_fallback.
GhostClippingFallbackWarning` naming the parameters, their share of the
model and why).

Privacy does not rest on that analysis: the released sum is
``sum_i c_i v_i`` where ``v_i`` is assembled from example ``i``'s own
activations and output gradients (``vmap`` over examples, a batched loss is
evaluated on a batch of one) and ``c_i`` is computed from ``||v_i||``
itself, so every contribution has norm at most ``C`` (up to rounding).
Non-finite norms get factor 0 and padded rows (``mask`` False) factor 0, with
``jnp.where`` (NaN-safe), as in :func:`zoprivacy.mechanisms.clipping.
clip_tree_per_example`. Norms are computed from factors scaled per
example by a power of two (:func:`~zoprivacy.first_order.ghost_certified.
scale`), so squares that would flush to zero or overflow do not. One
difference: an example whose dense-layer input or output gradient reaches
``2^64`` (or a gradient formed per example ``2^126``) contributes nothing,
where the explicit path might still clip it.
"""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp

from zoprivacy.core import physical_batches
from zoprivacy.first_order import ghost_certified as certified
from zoprivacy.first_order import ghost_fallback, ghost_groups, layer_capture
from zoprivacy.zo import queries


def _ghost_parts(per_example_loss, params, batch):
  """``(leaves, treedef, parts, summers, free_grads)`` of one backward
  pass: every part of the per-example gradients' norms and each layer
  group's ``factor -> sums`` function."""
  leaves, treedef = _distinct_leaves(params)
  calls, covered = layer_capture.discover(
    per_example_loss, leaves, treedef, batch
  )
  ghost_fallback.warn(calls, covered, leaves, treedef)  # once per trace
  tapped_idx = [k for k, c in enumerate(calls) if c.group in covered]
  free_grads, out_grads, inputs = _tapped_gradients(
    per_example_loss, leaves, treedef, batch, calls, covered, tapped_idx
  )
  parts, summers = _ghost_sq_norms(calls, tapped_idx, inputs, out_grads, leaves)
  parts += [ghost_groups.object_part(g) for g in free_grads.values()]
  return leaves, treedef, parts, summers, free_grads


def _sums(leaves, summers, free_grads, factor):
  """``{leaf index: sum_i factor_i grad_i}`` in float32 (or wider)."""
  sums = {
    i: ghost_groups.weighted_sum(g, factor) for i, g in free_grads.items()
  }
  for fn in summers:
    sums.update(fn(factor))
  return [sums[i] for i in range(len(leaves))]


def clipped_gradient_sum_of_loss(
  per_example_loss, params, batch, *, mask=None, clip
):
  """``(sum_{i: mask_i} clip_C(grad_i), ||grad_i|| [B])`` by ghost clipping.

  Equals ``clip_tree_per_example`` of ``queries.per_example_gradients``
  followed by ``masked_tree_sum`` (DP-SGD, Abadi et al. 2016, Alg. 1 lines
  4-6) up to float rounding, without per-example gradients of the supported
  layers (module docstring). ``per_example_loss(params, example) -> scalar``.
  """
  leaves, treedef, parts, summers, free_grads = _ghost_parts(
    per_example_loss, params, batch
  )
  size = jax.tree.leaves(batch)[0].shape[0]
  keep = jnp.ones((size,), bool) if mask is None else mask.astype(bool)
  factor, norms = certified.estimated_factor(parts, clip, keep)
  sums = _sums(leaves, summers, free_grads, factor)
  out = [x.astype(jnp.result_type(leaf)) for x, leaf in zip(sums, leaves)]
  return jax.tree.unflatten(treedef, out), norms


def certified_clipped_sum(loss_args, params, *, clip):
  """``(float32 tree, SumBound)``: the clipped sum with certified factors
  and the bound of its float error (:mod:`.ghost_certified`), for exact
  noise. ``loss_args`` as in :func:`clipped_gradient_sum`; with its
  ``physical_batch_size``, the sums of physical chunks are added one
  after another and the bound covers the additions
  (:meth:`~.ghost_certified.SumBound.over_chunks`)."""
  certified.check_platform()
  loss_one = queries.as_per_example_loss(
    loss_args.per_example_loss, loss_args.batched_loss
  )
  bounds = []  # each chunk's bound (static), recorded as it is traced

  def chunk_sum(batch, mask):
    leaves, treedef, parts, summers, free_grads = _ghost_parts(
      loss_one, params, batch
    )
    size = jax.tree.leaves(batch)[0].shape[0]
    keep = jnp.ones((size,), bool) if mask is None else mask.astype(bool)
    factor, bound = certified.certified_factor(parts, clip, keep, size)
    bounds.append(bound)
    sums = _sums(leaves, summers, free_grads, factor)
    return jax.tree.unflatten(treedef, sums)

  sums, chunks = physical_batches.sum_rows(
    chunk_sum,
    loss_args.batch,
    loss_args.mask,
    getattr(loss_args, "physical_batch_size", None),
  )
  entries = sum(x.size for x in jax.tree.leaves(sums))
  return sums, bounds[-1].over_chunks(chunks, entries)


def _tapped_gradients(
  per_example_loss, leaves, treedef, batch, calls, covered, tapped_idx
):
  """One ``vmap``-ed backward pass: ``(per-example gradients of the leaves
  outside the covered layers, per-example gradients of the tapped layer
  outputs, the tapped layers' inputs)``; refuses a loss whose layer calls
  differ between the discovery trace and this one."""
  in_group = {i for g in covered for i in g}
  fixed = {i: x for i, x in enumerate(leaves) if i in in_group}
  free = {i: x for i, x in enumerate(leaves) if i not in in_group}
  taps = {k: _zero_taps(calls[k]) for k in tapped_idx}
  sites = {k: calls[k].site for k in tapped_idx if calls[k].layers}
  # a stack's taps, inputs and output gradients keep the layer axis first
  # ([L, B, ...]: sliced layer by layer without a transpose)
  axis = [1 if calls[k].layers else 0 for k in tapped_idx]
  seen_calls = []

  def tapped(fixed, free, taps, example):
    inside = [fixed[i] if i in fixed else free[i] for i in range(len(leaves))]
    with layer_capture.Interceptor(
      inside, cut=frozenset(), covered=covered, taps=taps, sites=sites
    ) as icpt:
      loss = per_example_loss(jax.tree.unflatten(treedef, inside), example)
    seen_calls.append(icpt.calls)
    return loss, [icpt.inputs.get(k) for k in tapped_idx]

  grad_fn = jax.grad(tapped, argnums=(1, 2), has_aux=True)
  (free_grads, out_grads), inputs = jax.vmap(
    grad_fn,
    in_axes=(None, None, None, 0),
    out_axes=((0, dict(zip(tapped_idx, axis))), axis),
  )(fixed, free, taps, batch)
  same = [(c.group, c.kind, c.layers) for c in seen_calls[0]] == [
    (c.group, c.kind, c.layers) for c in calls
  ]
  if not same or any(x is None for x in inputs):
    raise RuntimeError(
      "Ghost clipping: the loss called its layers differently in two traces "
      "of the same example; use the explicit per-example path."
    )
  return free_grads, out_grads, dict(zip(tapped_idx, inputs))


def _zero_taps(call):
  """A call's taps: zeros like its output (``[L, ...]`` in a stack)."""
  lead = (call.layers,) if call.layers else ()
  return jax.tree.map(lambda s: jnp.zeros(lead + s.shape, s.dtype), call.out)


def _ghost_sq_norms(calls, tapped_idx, inputs, out_grads, leaves):
  """The parts of the per-example squared gradient norms of the layer
  groups (ghost or local norms) and, per group, its ``factor -> {leaf:
  sum_i factor_i grad_i}`` function."""
  groups = collections.defaultdict(list)
  for k in tapped_idx:
    groups[calls[k].group].append(k)
  parts, summers = [], []
  for ks in groups.values():
    more, fn = ghost_groups.group(
      [calls[k] for k in ks],
      [inputs[k] for k in ks],
      [out_grads[k] for k in ks],
      leaves,
    )
    parts, summers = parts + more, summers + [fn]
  return parts, summers


def _distinct_leaves(params):
  """Leaves as distinct objects (layers are matched to leaves by identity)."""
  leaves, treedef = jax.tree.flatten(params)
  seen = set()
  for i, leaf in enumerate(leaves):
    if id(leaf) in seen:
      leaves[i] = jnp.copy(leaf)
    seen.add(id(leaves[i]))
  return leaves, treedef


def clipped_gradient_sum(loss_args, params, *, clip):
  """Ghost-clipped ``(masked sum of clip_C(grad_i), per-example norms)``.

  ``loss_args``: the estimators' parsed extra arguments
  (:class:`zoprivacy.estimators.base.LossArgs`: ``per_example_loss`` or
  ``batched_loss``, ``batch``, ``mask``); a drop-in for DP-SGD's
  ``masked_tree_sum(clip_tree_per_example(per_example_gradients(...)))``.
  """
  loss_one = queries.as_per_example_loss(
    loss_args.per_example_loss, loss_args.batched_loss
  )
  return clipped_gradient_sum_of_loss(
    loss_one, params, loss_args.batch, mask=loss_args.mask, clip=clip
  )


def coverage(per_example_loss, params, batch) -> dict[str, str]:
  """How each parameter leaf's per-example norm is computed: ``"dense"``,
  ``"embed"`` (ghost norms), ``"local"`` (that layer's per-example
  gradient) or ``"per_example"`` (explicit fallback); keyed by tree path."""
  leaves, treedef = _distinct_leaves(params)
  calls, covered = layer_capture.discover(
    per_example_loss, leaves, treedef, batch
  )
  kind = {i: c.kind for c in calls if c.group in covered for i in c.group}
  paths = jax.tree_util.tree_leaves_with_path(params)
  return {
    jax.tree_util.keystr(p): kind.get(i, "per_example")
    for i, (p, _) in enumerate(paths)
  }
