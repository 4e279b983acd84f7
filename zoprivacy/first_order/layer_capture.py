"""Layer capture for ghost clipping: which layer calls a loss makes, with what.

The per-example loss runs under :func:`flax.linen.intercept_methods`. Each
supported layer call records its input and gets a zero tensor added to its
output (a "tap"), so one ``vmap(grad)`` with respect to the taps gives every
per-example output gradient. :func:`discover` traces the loss once and keeps a
layer only if the loss depends on its parameters through its intercepted calls
alone (a dependency check on the jaxpr, which follows the loss into scans
and jitted calls), so no parameter is under-counted.

Layer stacks. A model that runs a stack of layers through
:func:`zoprivacy.first_order.layer_stack.scan` (the causal LMs' decoder
stacks) has its stack run by :meth:`Interceptor.scan_stack`: a ``lax.scan``
over the layer index whose body slices every stack, applies the layer and
intercepts its calls as above, a call's parameters being matched to the
stacks they are sliced from. A tapped call inside a stack of ``L`` layers
gets its taps as a scanned ``[L, ...]`` input and returns its inputs as
scanned ``[L, ...]`` outputs (calls on the same input array share it), so
one ``vmap(grad)`` gives every layer's inputs and output gradients.
Used by :mod:`zoprivacy.first_order.ghost_clipping`.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax.linen import dtypes as flax_dtypes
from jax.extend import core as jex_core

from zoprivacy.first_order import layer_stack

LOCAL_TYPES = (nn.Conv, nn.LayerNorm, nn.RMSNorm, nn.Dense, nn.Embed)


@dataclasses.dataclass
class _Call:
  """One intercepted call of a supported leaf module."""

  group: tuple[int, ...]  # sorted leaf indices of the module's parameters
  kind: str  # "dense" | "embed" | "local"
  names: dict[str, int]  # parameter name -> leaf index
  module: Any  # unbound clone, for the local vjp
  arg_tree: Any  # treedef of (args, kwargs)
  static: dict[int, Any]  # non-array leaves of (args, kwargs) by position
  out: Any = None  # abstract output of one example (of one layer)
  layers: int = 0  # 0: called in the loss itself; L: in a stack of L layers
  site: int = -1  # which of the loss's stacks (in the order they run)


@dataclasses.dataclass
class _Frame:
  """One layer stack's body while it is traced."""

  top: Any  # the body's trace state
  leaf_of: dict[int, int]  # id(layer slice) -> index of its stacked leaf
  layers: int
  site: int
  taps: dict[int, Any]  # call index -> this layer's tap
  inputs: dict[int, Any] = dataclasses.field(default_factory=dict)


def _is_array(x) -> bool:
  return isinstance(x, (jax.Array, np.ndarray))


# jax.extend.core has it from jax 0.7; jax.core before (the oldest supported).
_OPAQUE_TRACE_STATE = (
  getattr(jex_core, "get_opaque_trace_state", None)
  or jax.core.get_opaque_trace_state
)


def _trace_state():
  return _OPAQUE_TRACE_STATE(convention="flax")


def _kind(module, params, args, kwargs) -> str | None:
  """Which rule gives this call's per-example norm; None: not supported."""
  if type(module) not in LOCAL_TYPES:
    return None
  if getattr(module, "axis_name", None) is not None:
    return None  # statistics across devices could mix examples
  plain = len(args) == 1 and not kwargs and _is_array(args[0])
  promote = getattr(module, "promote_dtype", None)
  default_promote = promote is flax_dtypes.promote_dtype
  if type(module) is nn.Dense and plain and default_promote:
    kernel = params.get("kernel")
    names_ok = set(params) == (
      {"kernel", "bias"} if module.use_bias else {"kernel"}
    )
    if (
      names_ok
      and module.dot_general is None
      and module.dot_general_cls is None
      and kernel.ndim == 2
      and args[0].shape[-1:] == kernel.shape[:1]
    ):
      return "dense"
  if type(module) is nn.Embed and plain and default_promote:
    if set(params) == {"embedding"} and module.num_embeddings > 1:
      return "embed"
  return "local"


class Interceptor:
  """Finds supported layer calls; cuts them (discovery) or taps them.

  Discovery (``taps is None``): calls of the groups in ``cut`` return zeros,
  so the loss's jaxpr shows whether their parameters are used elsewhere.
  Tapping: calls of the ``covered`` groups record their inputs and return
  ``output + z`` (``z = 0``, differentiated to get the output gradient);
  ``sites`` names the stack of each tapped call inside a stack. Use it as
  a context manager around the loss.
  """

  def __init__(self, leaves, *, cut=None, covered=(), taps=None, sites=None):
    counts = collections.Counter(id(x) for x in leaves)
    self.leaf_of = {
      id(x): i for i, x in enumerate(leaves) if counts[id(x)] == 1
    }
    self.top = _trace_state()
    self.cut, self.covered, self.taps = cut, covered, taps
    self.sites = sites or {}
    self.calls: list[_Call] = []
    self.inputs: dict[int, list] = {}
    self.frame: _Frame | None = None
    self.stacks = 0
    self._contexts = []

  def __enter__(self):
    ctx = contextlib.ExitStack()
    ctx.enter_context(nn.intercept_methods(self))
    ctx.enter_context(layer_stack.capturing(self.scan_stack))
    self._contexts.append(ctx)
    return self

  def __exit__(self, *exc):
    return self._contexts.pop().__exit__(*exc)

  def _eligible(self, args, kwargs, context) -> _Call | None:
    module = context.module
    if context.method_name != "__call__" or type(module) not in LOCAL_TYPES:
      return None
    frame = self.frame
    top = self.top if frame is None else frame.top
    leaf_of = self.leaf_of if frame is None else frame.leaf_of
    if _trace_state() != top:  # inside a nested transform
      return None
    try:
      variables = module.variables
    except Exception:  # noqa: BLE001 (unbound or unusual module)
      return None
    if set(variables) != {"params"} or not variables["params"]:
      return None
    params = dict(variables["params"])
    if not all(_is_array(v) and id(v) in leaf_of for v in params.values()):
      return None
    kind = _kind(module, params, args, kwargs)
    if kind is None:
      return None
    names = {n: leaf_of[id(v)] for n, v in params.items()}
    flat, arg_tree = jax.tree.flatten((args, kwargs))
    static = {i: x for i, x in enumerate(flat) if not _is_array(x)}
    clone = module.clone(parent=None)
    group = tuple(sorted(names.values()))
    call = _Call(group, kind, names, clone, arg_tree, static)
    if frame is not None:
      call.layers, call.site = frame.layers, frame.site
    return call

  def __call__(self, next_fun, args, kwargs, context):
    call = self._eligible(args, kwargs, context)
    if call is None:
      return next_fun(*args, **kwargs)
    index = len(self.calls)
    self.calls.append(call)
    out = next_fun(*args, **kwargs)
    call.out = jax.tree.map(_abstract, out)
    if self.taps is None:
      if self.cut is None or call.group in self.cut:
        return jax.tree.map(jnp.zeros_like, out)
      return out
    if call.group not in self.covered:
      return out
    arrays = [x for x in jax.tree.leaves((args, kwargs)) if _is_array(x)]
    if self.frame is None:
      self.inputs[index] = arrays
      tap = self.taps[index]
    else:
      self.frame.inputs[index] = arrays
      tap = self.frame.taps[index]
    return jax.tree.map(lambda o, z: o + z.astype(o.dtype), out, tap)

  def scan_stack(self, stacked, step, x, xs, slice_layer):
    """:func:`zoprivacy.first_order.layer_stack.scan`: the stack run as a
    ``lax.scan`` over the layer index whose calls are intercepted (module
    docstring); ``None`` (the model runs its own scan) for a stack inside a
    nested transform or one that holds no parameter leaf."""
    flat, tree = jax.tree.flatten(stacked)
    owner = [self.leaf_of.get(id(a)) for a in flat]
    if self.frame is not None or _trace_state() != self.top:
      return None
    if not flat or all(i is None for i in owner):
      return None
    site, layers, base = self.stacks, flat[0].shape[0], len(self.calls)
    self.stacks += 1
    taps = {
      k: t for k, t in (self.taps or {}).items() if self.sites.get(k) == site
    }
    same = {}

    @functools.partial(jax.checkpoint, policy=_SAVED)
    def layer(index, carry, xs_l, taps_l):
      del self.calls[base:]  # a body traced again replaces its calls
      slices = [slice_layer(a, index) for a in flat]
      leaf_of = {id(v): i for v, i in zip(slices, owner) if i is not None}
      self.frame = _Frame(_trace_state(), leaf_of, layers, site, taps_l)
      try:
        carry, ys = step(jax.tree.unflatten(tree, slices), carry, xs_l)
        own, shared = _shared_inputs(self.frame.inputs)
      finally:
        self.frame = None
      same.clear()
      same.update(shared)
      return carry, (ys, own)

    def body(carry, scanned_in):
      index, xs_l, taps_l = scanned_in
      return layer(index, carry, xs_l, taps_l)

    indices = jnp.arange(layers, dtype=jnp.int32)
    x, (ys, own) = jax.lax.scan(body, x, (indices, xs, taps))
    self.inputs.update(own)
    self.inputs.update({k: own[first] for k, first in same.items()})
    return x, ys


# What a stack's backward pass keeps of each layer: the outputs of its
# products; the rest (the layer's parameter slices above all, which a
# scan would otherwise keep as an [L, ...] copy of every stack, in the
# compute dtype) is formed again, layer by layer, from the stacks.
_SAVED = jax.checkpoint_policies.dots_saveable


def _shared_inputs(inputs):
  """``(own, same)``: the recorded inputs of one layer's calls, each array
  once (``own``, by call), and ``same[k]``: the earlier call whose inputs
  call ``k``'s are (the query, key and value projections share theirs)."""
  own, same, seen = {}, {}, {}
  for k, arrays in inputs.items():
    key = tuple(id(a) for a in arrays)
    if key in seen:
      same[k] = seen[key]
    else:
      seen[key], own[k] = k, arrays
  return own, same


_CALL_PRIMITIVES = (
  "jit",
  "pjit",
  "closed_call",
  "core_call",
  "checkpoint",
  "remat2",
)


def _eqn_used(eqn, wanted: list[bool]) -> list[bool]:
  """Which inputs of ``eqn`` its ``wanted`` outputs may depend on: through
  a scan's body (to a fixed point over its carry), a call's jaxpr or an
  optimization barrier (output ``i`` reads input ``i``); every input for
  any other equation with a wanted output, and for one with effects."""
  name = eqn.primitive.name
  if eqn.effects:
    return [True] * len(eqn.invars)
  if name == "optimization_barrier":
    return wanted
  body = eqn.params.get("jaxpr")
  if name == "scan":
    consts, carries = eqn.params["num_consts"], eqn.params["num_carry"]
    carry = wanted[:carries]
    while True:
      used = _used_inputs(body, carry + wanted[carries:])
      more = [a or b for a, b in zip(carry, used[consts : consts + carries])]
      if more == carry:
        return used
      carry = more
  if name in _CALL_PRIMITIVES and body is not None:
    return _used_inputs(body, wanted)
  return [True] * len(eqn.invars)


def _used_inputs(jaxpr, wanted=None) -> list[bool]:
  """Which inputs of ``jaxpr`` (closed or open) its ``wanted`` outputs
  (default: all) may depend on; conservative (:func:`_eqn_used`)."""
  jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
  wanted = [True] * len(jaxpr.outvars) if wanted is None else wanted
  used = {
    v
    for v, w in zip(jaxpr.outvars, wanted)
    if w and isinstance(v, jex_core.Var)
  }
  for eqn in reversed(jaxpr.eqns):
    out = [v in used for v in eqn.outvars]
    if not (any(out) or eqn.effects):
      continue
    for v, u in zip(eqn.invars, _eqn_used(eqn, out)):
      if u and isinstance(v, jex_core.Var):
        used.add(v)
  return [v in used for v in jaxpr.invars]


def _abstract(x):
  return jax.ShapeDtypeStruct(np.shape(x), jnp.result_type(x))


def discover(loss_one, leaves, treedef, batch):
  """``(calls, covered groups)`` of one example's loss.

  A group is covered when the loss does not depend on its parameters once its
  calls are cut (iterated: uncovering one group can never cover another).
  """
  example = jax.tree.map(lambda x: _abstract(x[0]), batch)
  abstract_leaves = [_abstract(x) for x in leaves]
  cut = None
  while True:
    found = []

    def probe(leaves, example, cut=cut, found=found):
      with Interceptor(leaves, cut=cut) as icpt:
        loss = loss_one(jax.tree.unflatten(treedef, leaves), example)
      found.append(icpt.calls)
      return loss

    used = _used_inputs(jax.make_jaxpr(probe)(abstract_leaves, example))
    calls = found[0]
    groups = {c.group for c in calls}
    if cut is None:
      cut = set(groups)
      owners = collections.Counter(i for g in groups for i in g)
      cut -= {g for g in groups if any(owners[i] > 1 for i in g)}
      by_group = collections.defaultdict(set)
      for c in calls:
        by_group[c.group].add(
          (c.kind, c.layers, tuple(sorted(c.names.items())))
        )
      cut -= {g for g, kinds in by_group.items() if len(kinds) > 1}
      if cut != groups:
        continue
    bad = {g for g in cut if any(used[i] for i in g)}
    if not bad:
      return calls, frozenset(cut)
    cut = cut - bad
