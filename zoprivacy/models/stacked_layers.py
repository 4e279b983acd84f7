"""The decoder-layer stack of the causal LMs, run without a float32 copy of
a 16-bit stack.

:class:`~zoprivacy.models.opt.OPTForCausalLM` and
:class:`~zoprivacy.models.llama.LlamaForCausalLM` declare their layers as
one ``nn.scan`` over parameters stacked on a leading layer axis. Flax's scan
hands the stacks to ``lax.scan`` as scanned inputs, and the slice it takes
of each in the loop body is a ``dynamic-slice``: on a bfloat16 stack,
XLA:CPU's float normalization turns it into ``convert_f32`` of the whole
stack (hoisted out of the loop) and a float32 slice. The model's own forward
pass (evaluation, and every step that is not layer-wise) then held a
float32 copy of every stacked leaf, and its compiled peak with bfloat16
weights was *above* float32's (1.16x at the opt-125m shape, 1.39x at
opt-1.3b).

:func:`scan_layers` runs the same layers as a ``lax.scan`` over the layer
indices whose body takes layer ``l``'s slices with
:func:`~zoprivacy.models.narrow_slices.index_layer` (16-bit stacks are
sliced as their bits) and applies the unbound layer module to them, so only
one layer is ever converted to the compute dtype. The arithmetic is the
layer's own, unchanged; the float32 path (no 16-bit leaf) and
initialization keep Flax's ``nn.scan`` (the same compiled program as
before). Ghost clipping's traces of a loss run the stack through
:func:`zoprivacy.first_order.layer_stack.scan`, which taps the layers
inside it (the same layers and arithmetic, one ``lax.scan``).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from zoprivacy.first_order import layer_stack
from zoprivacy.models import narrow_slices


def scan_layers(scanned: nn.Module, layer: nn.Module, x, cache, *broadcast):
  """``scanned(x, cache, *broadcast)`` (the bound ``nn.scan`` submodule)
  with 16-bit stacks sliced one layer at a time (module docstring).

  ``layer``: the unbound decoder layer module that ``scanned`` scans (the
  same fields), called as ``layer(x, layer_cache, *broadcast) -> (x,
  layer_cache)``. ``cache``: ``None`` or a tree of ``[layers, ...]`` arrays
  scanned with the layers (the key/value cache of generation).
  """
  if scanned.is_initializing():
    return scanned(x, cache, *broadcast)
  stacked = scanned.variables["params"]

  def step(params, x, layer_cache):
    return layer.apply({"params": params}, x, layer_cache, *broadcast)

  captured = layer_stack.scan(
    stacked, step, x, cache, narrow_slices.index_layer
  )
  if captured is not None:  # ghost clipping's trace (layer_stack)
    return captured
  if not any(narrow_slices.is_narrow(p) for p in jax.tree.leaves(stacked)):
    return scanned(x, cache, *broadcast)

  def body(x, scanned_in):
    index, layer_cache = scanned_in
    return step(narrow_slices.index_layer(stacked, index), x, layer_cache)

  layers = jax.tree.leaves(stacked)[0].shape[0]
  indices = jnp.arange(layers, dtype=jnp.int32)
  return jax.lax.scan(body, x, (indices, cache))


def embed_lookup(embed: nn.Embed, ids):
  """``embed(ids)`` without converting a 16-bit table whole: flax's
  ``nn.Embed`` casts the whole table to its compute dtype, then gathers;
  here a 16-bit table's rows are gathered as bits and only they are cast.
  A float32 table goes through ``embed(ids)`` itself."""
  table = embed.embedding
  if not narrow_slices.is_narrow(table):
    return embed(ids)
  rows = narrow_slices.take_rows(table, ids)
  return rows if embed.dtype is None else rows.astype(embed.dtype)
