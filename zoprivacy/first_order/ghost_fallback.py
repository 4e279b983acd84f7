"""Ghost clipping says so when it falls back to per-example gradients.

:mod:`~zoprivacy.first_order.ghost_clipping` gets the per-example norms of
the layers it recognizes without per-example gradients; every other
parameter gets explicit per-example gradients (``B`` copies of it), which
is what ``per_example_clipping='explicit'`` costs. A model written as plain
functions falls back entirely: the 4.2M-parameter wide MLP at batch 64 took
4.2-4.8x the time per step of the same layers written as ``nn.Dense`` (2
CPU cores, shared). :func:`warn` says so
once per trace of the step, with a :class:`GhostClippingFallbackWarning`
naming the parameters, their share of the model and why.
"""

from __future__ import annotations

import math
import warnings

import flax.linen as nn
import jax

_SHOWN = 6  # parameter paths named per reason
_UNCALLED = (
  "no flax nn.Dense / nn.Embed / nn.Conv / nn.LayerNorm / nn.RMSNorm call "
  "reads them directly in the loss (a model written as plain functions, a "
  "parameter declared in a module that is not a leaf layer, a layer inside "
  "nn.scan / nn.remat / jax.jit / vmap in the loss (a stack of layers is "
  "seen through zoprivacy.models.stacked_layers.scan_layers), or "
  "parameters transformed before apply)"
)
_SHARED = (
  "they reach the loss outside their layer's call too (tied or shared "
  "weights, a regularizer on them, or one layer called in two ways)"
)
_LOCAL = (
  "an nn.Dense / nn.Embed with a custom dot_general, dtype promotion or "
  "call arguments: its own per-example gradient, layer by layer"
)


class GhostClippingFallbackWarning(UserWarning):
  """Ghost clipping computes explicit per-example gradients for some
  parameters (slower and larger than its ghost norms)."""


def _paths(treedef, indices) -> list[str]:
  numbered = jax.tree.unflatten(treedef, list(range(treedef.num_leaves)))
  path_of = {
    i: jax.tree_util.keystr(p)
    for p, i in jax.tree_util.tree_leaves_with_path(numbered)
  }
  return [path_of[i] for i in indices]


def _sentence(count, size, total, names, why) -> str:
  shown = ", ".join(names[:_SHOWN])
  more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
  return (
    f"{count} parameter array(s), {size:,} of {total:,} parameters "
    f"({100 * size / max(total, 1):.1f}% of the model): {shown}{more}; "
    f"why: {why}"
  )


def warn(calls, covered, leaves, treedef) -> None:
  """Warns (once; call it once per trace) if any parameter leaf falls back
  from the ghost norm: ``calls`` and ``covered`` are
  :func:`~zoprivacy.first_order.layer_capture.discover`'s."""
  in_covered = {i for g in covered for i in g}
  called = {i for c in calls for i in c.group}
  local = {
    i
    for c in calls
    if c.group in covered
    and c.kind == "local"
    and type(c.module) in (nn.Dense, nn.Embed)
    for i in c.group
  }
  groups = [
    (sorted(set(range(len(leaves))) - called), _UNCALLED),
    (sorted(called - in_covered), _SHARED),
    (sorted(local), _LOCAL),
  ]
  total = sum(math.prod(x.shape) for x in leaves)
  parts = [
    _sentence(
      len(idx),
      sum(math.prod(leaves[i].shape) for i in idx),
      total,
      _paths(treedef, idx),
      why,
    )
    for idx, why in groups
    if idx
  ]
  if not parts:
    return
  warnings.warn(
    "Ghost clipping falls back to explicit per-example gradients (B copies "
    "of each, as per_example_clipping='explicit' costs) for "
    + "; and for ".join(parts)
    + ". Call the layers as flax modules with the parameters unchanged to "
    "get ghost norms; zoprivacy.first_order.ghost_clipping.coverage(loss, "
    "params, batch) lists how each parameter is handled.",
    GhostClippingFallbackWarning,
    stacklevel=3,
  )
