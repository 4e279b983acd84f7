"""Parameter subsets for zeroth-order fine-tuning: split a params pytree into
(trainable, frozen), merge back, and LoRA adapters on chosen Dense kernels.

Zeroth-order methods perturb every trainable coordinate along a random
direction, so their variance grows with the dimension; restricting the
perturbation to a subset is the standard remedy:

* **BitFit** (Ben Zaken et al., 2022): only bias vectors are trained.
* **LoRA** (Hu et al., 2022): frozen ``W`` plus a trainable low-rank
  ``(alpha / r) * A @ B``; ``B = 0`` at initialisation, so the merged model
  starts equal to the pretrained one. DP-ZO fine-tunes OPT-13B with LoRA
  (DP-ZO-LoRA, under 1% of the weights) and compares with DP-SGD-LoRA and
  DP-SGD-BitFit; DPZero's LoRA / DP-LoRA baselines use rank 8 and alpha 16
  (``LoRA(rank=8, alpha=16.0)``).

Usage with any Flax model and an estimator that perturbs a pytree::

    trainable, frozen = split_params(params, bitfit)          # or lora_only etc.
    loss_of_trainable = bind_frozen(loss_fn, frozen)         # loss_fn(params, batch)
    ... estimator perturbs `trainable` only ...
    params = merge_params(trainable, frozen)

    lora = LoRA(rank=8, targets=r"(query|value)/kernel$")
    adapters = lora.init(rng, params)                       # trainable
    out = model.apply({"params": lora.merge(params, adapters)}, x)

All functions are pure and jit/vmap-friendly (no Python-side state).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from flax import traverse_util

Predicate = Callable[[tuple[str, ...], Any], bool]


def _flat(tree) -> dict:
  return traverse_util.flatten_dict(_unfreeze(tree))


def _unfreeze(tree):
  if hasattr(tree, "unfreeze"):
    return tree.unfreeze()
  return tree


def path_str(path: tuple[str, ...]) -> str:
  return "/".join(str(p) for p in path)


def split_params(params, predicate: Predicate) -> tuple[dict, dict]:
  """``(trainable, frozen)``: nested dicts holding the leaves for which
  ``predicate(path, leaf)`` is true / false (each keeps only its own leaves,
  so both are ordinary pytrees for ``jax.tree`` maps)."""
  flat = _flat(params)
  trainable = {k: v for k, v in flat.items() if predicate(k, v)}
  frozen = {k: v for k, v in flat.items() if k not in trainable}
  return traverse_util.unflatten_dict(trainable), traverse_util.unflatten_dict(
    frozen
  )


def merge_params(trainable, frozen) -> dict:
  """Inverse of :func:`split_params`; raises if a path is in both parts."""
  a, b = _flat(trainable), _flat(frozen)
  both = set(a) & set(b)
  if both:
    raise ValueError(
      f"paths present in both parts: {sorted(map(path_str, both))[:5]}"
    )
  return traverse_util.unflatten_dict({**b, **a})


def bind_frozen(
  fn: Callable, frozen, merge: Callable = merge_params
) -> Callable:
  """``lambda trainable, *args: fn(merge(trainable, frozen), *args)``."""

  def bound(trainable, *args, **kwargs):
    return fn(merge(trainable, frozen), *args, **kwargs)

  return bound


def bitfit(path: tuple[str, ...], leaf) -> bool:
  """BitFit predicate: bias vectors only (Flax leaves named ``bias``; LayerNorm
  biases included, as in Ben Zaken et al.)."""
  return path[-1] == "bias"


def path_regex(pattern: str) -> Predicate:
  """Predicate matching ``"/".join(path)`` against ``pattern`` (``re.search``)."""
  rx = re.compile(pattern)
  return lambda path, leaf: rx.search(path_str(path)) is not None


def num_params(tree) -> int:
  return sum(int(x.size) for x in jax.tree_util.tree_leaves(tree))


@dataclasses.dataclass(frozen=True)
class LoRA:
  """Low-rank adapters on the 2-D ``kernel`` leaves whose path matches ``targets``.

  The adapter tree mirrors the model's: for a kernel at ``a/b/kernel`` of shape
  ``(d_in, d_out)`` it holds ``a/b/lora_A`` ``(d_in, rank)`` (Gaussian,
  std ``1/sqrt(d_in)``) and ``a/b/lora_B`` ``(rank, d_out)`` (zeros).
  :meth:`merge` returns params with ``kernel + (alpha / rank) * A @ B``.
  ``alpha=None`` means ``alpha = rank`` (scale 1).
  """

  rank: int
  targets: str = r"(query|value)/kernel$"
  alpha: float | None = None

  @property
  def scale(self) -> float:
    return 1.0 if self.alpha is None else self.alpha / self.rank

  # Kernels adapted: 2-D ``[d_in, d_out]``; a subclass for stacked layers
  # sets 3 (``[L, d_in, d_out]``, one adapter pair per layer).
  kernel_ndim: ClassVar[int] = 2

  def target_paths(self, params) -> list:
    rx = re.compile(self.targets)
    paths = [
      k
      for k, v in _flat(params).items()
      if k[-1] == "kernel"
      and jnp.ndim(v) == self.kernel_ndim
      and rx.search(path_str(k))
    ]
    if not paths:
      raise ValueError(
        f"no {self.kernel_ndim}-D kernel matches {self.targets!r}"
      )
    return sorted(paths)

  def init(self, rng, params) -> dict:
    flat = _flat(params)
    adapters = {}
    paths = self.target_paths(params)
    for key, path in zip(jax.random.split(rng, len(paths)), paths):
      w = flat[path]
      *lead, d_in, d_out = w.shape
      adapters[path[:-1] + ("lora_A",)] = jax.random.normal(
        key, (*lead, d_in, self.rank), w.dtype
      ) / jnp.sqrt(d_in).astype(w.dtype)
      adapters[path[:-1] + ("lora_B",)] = jnp.zeros(
        (*lead, self.rank, d_out), w.dtype
      )
    return traverse_util.unflatten_dict(adapters)

  def merge(self, params, adapters) -> dict:
    flat = _flat(params)
    ad = _flat(adapters)
    for path in {k[:-1] for k in ad}:
      a, b = ad[path + ("lora_A",)], ad[path + ("lora_B",)]
      kpath = path + ("kernel",)
      if kpath not in flat:
        raise KeyError(f"adapter for {path_str(path)} has no kernel in params")
      flat[kpath] = flat[kpath] + self.scale * (a @ b)
    return traverse_util.unflatten_dict(flat)


# --- LoRA on stacked (scanned) kernels --------------------------------------


@dataclasses.dataclass(frozen=True)
class StackedLoRA(LoRA):
  """:class:`LoRA` on 3-D kernels ``[L, d_in, d_out]`` stacked for a layer
  scan (e.g. OPT's ``layers/self_attn/q_proj/kernel``).

  Per layer ``l`` the adapter is ``(alpha / rank) A_l @ B_l`` with
  ``lora_A`` ``[L, d_in, rank]`` (Gaussian, std ``1/sqrt(d_in)``) and
  ``lora_B`` ``[L, rank, d_out]`` (zeros), as Hu et al. (2022) per matrix.
  :meth:`merge` is :class:`LoRA`'s (``A @ B`` is batched over the layer
  axis), and it also merges one layer's 2-D slices inside a scan body.
  The default targets are DP-ZO's query and value projections of OPT.
  """

  targets: str = r"self_attn/(q_proj|v_proj)/kernel$"
  kernel_ndim: ClassVar[int] = 3
