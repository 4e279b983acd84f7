"""Layer capture for ghost clipping: which layer calls a loss makes, with what.

The per-example loss runs under :func:`flax.linen.intercept_methods`. Each
supported layer call records its input and gets a zero tensor added to its
output (a "tap"), so one ``vmap(grad)`` with respect to the taps gives every
per-example output gradient. :func:`discover` traces the loss once and keeps a
layer only if the loss depends on its parameters through its intercepted calls
alone (a dependency check on the jaxpr), so no parameter is under-counted.
Used by :mod:`zoprivacy.first_order.ghost_clipping`.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax.linen import dtypes as flax_dtypes
from jax.extend import core as jex_core

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
  out: Any = None  # abstract output of one example


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
  ``output + z`` (``z = 0``, differentiated to get the output gradient).
  """

  def __init__(self, leaves, *, cut=None, covered=(), taps=None):
    counts = collections.Counter(id(x) for x in leaves)
    self.leaf_of = {
      id(x): i for i, x in enumerate(leaves) if counts[id(x)] == 1
    }
    self.top = _trace_state()
    self.cut, self.covered, self.taps = cut, covered, taps
    self.calls: list[_Call] = []
    self.inputs: dict[int, list] = {}

  def _eligible(self, args, kwargs, context) -> _Call | None:
    module = context.module
    if context.method_name != "__call__" or type(module) not in LOCAL_TYPES:
      return None
    if _trace_state() != self.top:  # inside a nested transform
      return None
    try:
      variables = module.variables
    except Exception:  # noqa: BLE001 (unbound or unusual module)
      return None
    if set(variables) != {"params"} or not variables["params"]:
      return None
    params = dict(variables["params"])
    if not all(_is_array(v) and id(v) in self.leaf_of for v in params.values()):
      return None
    kind = _kind(module, params, args, kwargs)
    if kind is None:
      return None
    names = {n: self.leaf_of[id(v)] for n, v in params.items()}
    flat, arg_tree = jax.tree.flatten((args, kwargs))
    static = {i: x for i, x in enumerate(flat) if not _is_array(x)}
    clone = module.clone(parent=None)
    group = tuple(sorted(names.values()))
    return _Call(group, kind, names, clone, arg_tree, static)

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
    flat = jax.tree.leaves((args, kwargs))
    self.inputs[index] = [x for x in flat if _is_array(x)]
    return jax.tree.map(
      lambda o, z: o + z.astype(o.dtype), out, self.taps[index]
    )


def _used_inputs(closed_jaxpr) -> list[bool]:
  """Which inputs the outputs may depend on (conservative: an equation that
  produces a used value uses all its inputs, sub-jaxprs included)."""
  jaxpr = closed_jaxpr.jaxpr
  used = {v for v in jaxpr.outvars if isinstance(v, jex_core.Var)}
  for eqn in reversed(jaxpr.eqns):
    if eqn.effects or any(v in used for v in eqn.outvars):
      used.update(v for v in eqn.invars if isinstance(v, jex_core.Var))
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
      icpt = Interceptor(leaves, cut=cut)
      with nn.intercept_methods(icpt):
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
        by_group[c.group].add((c.kind, tuple(sorted(c.names.items()))))
      cut -= {g for g, kinds in by_group.items() if len(kinds) > 1}
      if cut != groups:
        continue
    bad = {g for g in cut if any(used[i] for i in g)}
    if not bad:
      return calls, frozenset(cut)
    cut = cut - bad
