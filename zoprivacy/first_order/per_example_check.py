"""Checks that a batched loss is a true per-example function.

The contract every estimator relies on:

  Entry ``i`` of ``batched_loss(params, batch)`` depends only on ``params``
  and on example ``i`` of ``batch`` (row ``i`` of every leaf). Padding rows
  are examples too and must not affect other rows.

Per-example clipping bounds one example's contribution to the clipped sum
by ``C`` only under this contract. A loss that mixes examples (batch norm
with batch statistics, in-batch negatives, a loss normalized by the batch
mean, a softmax over the batch) lets one example move every other example's
loss, so adding or removing it can move the clipped sum by up to ``2 C B``
and the privacy guarantee no longer holds.

:func:`check_per_example` tests the contract empirically in one jitted call
(the loss traced once, ``vmap``-ed over ``num_probes + 2`` variants of the
batch, i.e. ``num_probes + 2`` forward passes of batch size ``B``):

* the batch as given (the reference losses);
* the batch with its rows cyclically permuted: the losses must be permuted
  the same way (a loss may not depend on an example's position, since adding
  or removing an example shifts the others to other slots);
* ``num_probes`` variants, each replacing one example ``j`` (chosen with a
  public key) in every leaf by another row of the batch, by a synthetic
  example or by zeros (typical padding): the losses of all other rows
  ``i != j`` must not move.

A loss "does not move" when ``|after - before| <= atol + rtol * |before|``.
The defaults (``atol=1e-6``, ``rtol=1e-5``) sit about two orders of
magnitude above float32 rounding (``eps = 1.2e-7``), which XLA can produce
when the batch's contents change the order of a reduction, and far below
what a mixing loss moves (typically ``1e-3`` to ``1e-1`` relative). NaN
equal to NaN and equal infinities count as unchanged.

The check needs no private data: run it once at start-up on public inputs,
or on :func:`synthetic_batch_like` of a batch. Passing is evidence, not a
proof: a loss that mixes examples only on some inputs can slip through.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.first_order.per_example_report import (
  CrossExampleDependenceError,
  PerExampleReport,
  Violation,
)

BatchedLoss = Callable[[Any, Any], jax.Array]
__all__ = [
  "CrossExampleDependenceError",
  "PerExampleReport",
  "Violation",
  "assert_per_example",
  "check_per_example",
  "synthetic_batch_like",
]


def _as_key(key):
  if key is None:
    return jax.random.key(0)
  if isinstance(key, (int, np.integer)):
    return jax.random.key(int(key))
  return key


def _numpy_rng(key) -> np.random.Generator:
  bits = np.asarray(jax.random.bits(_as_key(key), (4,), jnp.uint32))
  return np.random.default_rng([int(b) for b in bits])


def _synthetic_leaf(x, rng: np.random.Generator):
  """Uniform values within the leaf's observed range, same shape and dtype."""
  a = np.asarray(x)
  dtype = a.dtype
  if a.size == 0:
    out = np.zeros_like(a)
  elif dtype == np.bool_:
    both = bool(a.any()) and not bool(a.all())
    out = rng.random(a.shape) < 0.5 if both else a.copy()
  elif jnp.issubdtype(dtype, jnp.integer):
    out = rng.integers(
      a.min(), a.max(), size=a.shape, dtype=dtype, endpoint=True
    )
  elif jnp.issubdtype(dtype, jnp.floating):
    finite = a[np.isfinite(a.astype(np.float64))].astype(np.float64)
    lo, hi = (finite.min(), finite.max()) if finite.size else (0.0, 0.0)
    out = rng.uniform(lo, hi, size=a.shape).astype(dtype)
  else:
    out = a.copy()
  return out if isinstance(x, np.ndarray) else jnp.asarray(out, dtype)


def synthetic_batch_like(batch, key):
  """A random batch with the shapes and dtypes of ``batch``.

  Each leaf is drawn uniformly within that leaf's observed ``[min, max]``
  (integers inclusive), so token ids and labels stay valid indices and
  images stay in their range; a constant leaf stays constant, a boolean leaf
  holding both values becomes random bits. Other dtypes are copied. Only the
  per-leaf min and max of ``batch`` are read.

  Args:
    batch: pytree of arrays sharing a leading batch axis.
    key: public PRNG key (or int seed).

  Returns:
    A pytree like ``batch``: numpy leaves stay numpy, others become jax
    arrays of the same dtype.
  """
  leaves, treedef = jax.tree.flatten(batch)
  rng = _numpy_rng(key)
  return jax.tree.unflatten(treedef, [_synthetic_leaf(x, rng) for x in leaves])


def _choose_probes(batch_size, num_probes, mask, rng):
  """Distinct positions; with padding, at least one padded and one real."""
  order = [int(i) for i in rng.permutation(batch_size)]
  chosen = []
  if mask is not None and num_probes >= 2:
    for want in (False, True):
      chosen += [i for i in order if bool(mask[i]) == want][:1]
  chosen += [i for i in order if i not in chosen]
  return chosen[: min(num_probes, batch_size)]


def _replacement(leaves, synthetic, j, kind, mask, rng):
  """Example ``j``'s replacement (a list of rows) and its description."""
  if kind == "row":
    others = [k for k in range(leaves[0].shape[0]) if k != j]
    real = [k for k in others if mask is None or mask[k]]
    pool = real or others
    for k in rng.permutation(pool):
      rows = [leaf[int(k)] for leaf in leaves]
      if not all(np.array_equal(r, leaf[j]) for r, leaf in zip(rows, leaves)):
        return rows, f"row {int(k)} of the batch"
    kind = "synthetic"
  if kind == "synthetic":
    return [leaf[j] for leaf in synthetic], "a synthetic example"
  return [np.zeros_like(leaf[j]) for leaf in leaves], "zeros (padding)"


def _compare(before, after, rows, rtol, atol):
  """``(moved flags, |change|, tolerance)`` on ``rows``."""
  b, a = before[rows], after[rows]
  close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
  with np.errstate(invalid="ignore"):
    change = np.where(close, 0.0, np.abs(a - b))
  change = np.where(np.isnan(change), np.inf, change)
  return ~close, change, atol + rtol * np.abs(b)


def _violation(check, probe, replacement, rows, before, after, rtol, atol):
  moved, change, tol = _compare(before, after, rows, rtol, atol)
  max_change = float(change.max()) if rows.size else 0.0
  if not moved.any():
    return None, max_change
  worst = int(np.argmax(change))
  row = int(rows[worst])
  return Violation(
    check,
    probe,
    replacement,
    row,
    float(before[row]),
    float(after[row]),
    float(change[worst]),
    float(tol[worst]),
    int(moved.sum()),
    int(rows.size),
  ), max_change


def check_per_example(
  batched_loss: BatchedLoss,
  params,
  batch,
  *,
  mask=None,
  num_probes: int = 3,
  rtol: float = 1e-5,
  atol: float = 1e-6,
  key=None,
) -> PerExampleReport:
  """Tests whether ``batched_loss`` is a true per-example function.

  The contract: entry ``i`` of ``batched_loss(params, batch)`` depends only
  on ``params`` and on example ``i`` of ``batch``; padding rows are examples
  too and must not affect other rows. See the module docstring for the
  probes. For ``per_example_loss(params, example)`` pass
  ``zoprivacy.zo.queries.as_batched_loss(per_example_loss=...)``; it passes by
  construction.

  Run it on public or synthetic inputs (:func:`synthetic_batch_like`), not
  on private data: the outcome depends on the batch's contents.

  Args:
    batched_loss: ``(params, batch) -> [B]``; must be jit- and vmap-able.
    params: parameters to evaluate at.
    batch: pytree whose leaves share a leading axis ``B`` (numeric dtypes).
    mask: optional ``[B]`` bool, True for real examples. Padded slots are
      probed too (at least one when ``num_probes >= 2``), but only real rows'
      losses are compared, since padded losses are discarded downstream.
    num_probes: how many positions to replace (at most ``B``).
    rtol: relative tolerance on each compared loss (the default suits
      float32; for bfloat16 or float16 losses use about ``1e-2``).
    atol: absolute tolerance on each compared loss.
    key: public PRNG key or int seed choosing probes and replacements;
      defaults to seed 0.

  Returns:
    A :class:`PerExampleReport`; ``report.ok`` says whether it passed.

  Raises:
    ValueError: if the batch has no common leading axis, ``num_probes < 1``,
      or the loss does not return shape ``[B]``.
  """
  leaves, treedef, batch_size, mask = _checked_inputs(batch, mask, num_probes)
  key = _as_key(key)
  rng = _numpy_rng(key)
  perm, probes, replacements, variants = _variants(
    leaves, treedef, batch_size, int(num_probes), mask, key, rng
  )
  stacked = jax.tree.unflatten(
    treedef, [np.stack(column) for column in zip(*variants)]
  )
  losses = jax.jit(jax.vmap(batched_loss, in_axes=(None, 0)))(params, stacked)
  if losses.shape != (len(variants), batch_size):
    raise ValueError(
      f"batched_loss must return shape [B] = [{batch_size}], "
      f"got {losses.shape[1:]}."
    )
  losses = np.asarray(losses, np.float64)
  real = np.ones(batch_size, bool) if mask is None else mask
  violations, max_change = _all_violations(
    losses, perm, probes, replacements, real, rtol, atol
  )
  return PerExampleReport(
    ok=not violations,
    batch_size=batch_size,
    probes=tuple(probes),
    replacements=tuple(replacements),
    violations=tuple(violations),
    max_change=max_change,
    num_nonfinite=int(np.sum(~np.isfinite(losses[0][real]))),
    num_evaluations=len(variants),
    rtol=rtol,
    atol=atol,
  )


def _checked_inputs(batch, mask, num_probes):
  """``(leaves, treedef, B, mask)``: the batch's leaves as numpy arrays with
  one common leading axis ``B``, and the mask as ``bool[B]`` (or None)."""
  if (
    isinstance(num_probes, bool)
    or int(num_probes) != num_probes
    or num_probes < 1
  ):
    raise ValueError(f"num_probes must be an integer >= 1, got {num_probes!r}.")
  leaves, treedef = jax.tree.flatten(batch)
  leaves = [np.asarray(x) for x in leaves]
  sizes = {x.shape[0] if x.ndim else None for x in leaves}
  if not leaves or len(sizes) != 1 or None in sizes:
    raise ValueError(
      "Every leaf of batch needs the same leading batch axis; "
      f"got shapes {[x.shape for x in leaves]}."
    )
  batch_size = sizes.pop()
  if mask is not None:
    mask = np.asarray(mask).astype(bool).reshape(-1)
    if mask.shape != (batch_size,):
      raise ValueError(
        f"mask must have shape [{batch_size}], got {mask.shape}."
      )
  return leaves, treedef, batch_size, mask


def _variants(leaves, treedef, batch_size, num_probes, mask, key, rng):
  """``(perm, probes, replacements, variants)``. Variant 0 is the batch, 1
  a single-cycle permutation of it, 2+ one replaced row each (a row of the
  batch, a synthetic row or zeros, in turn)."""
  synthetic = jax.tree.leaves(
    synthetic_batch_like(
      jax.tree.unflatten(treedef, leaves), jax.random.fold_in(key, 1)
    )
  )
  synthetic = [np.asarray(x) for x in synthetic]
  cycle = rng.permutation(batch_size)
  perm = np.empty(batch_size, np.int64)
  perm[cycle] = np.roll(cycle, -1)  # slot cycle[t] gets cycle[t + 1].
  probes = _choose_probes(batch_size, num_probes, mask, rng)
  kinds = ("row", "synthetic", "zeros")
  variants = [list(leaves), [leaf[perm] for leaf in leaves]]
  replacements = []
  for p, j in enumerate(probes):
    rows, text = _replacement(leaves, synthetic, j, kinds[p % 3], mask, rng)
    replacements.append(text)
    variant = [leaf.copy() for leaf in leaves]
    for leaf, row in zip(variant, rows):
      leaf[j] = row
    variants.append(variant)
  return perm, probes, replacements, variants


def _all_violations(losses, perm, probes, replacements, real, rtol, atol):
  """``(violations, max_change)``: every real example's loss in each
  variant against its loss in the batch."""
  before = losses[0]
  violations, max_change = [], 0.0
  # After the permutation slot s holds example perm[s]: permuted[e] is
  # example e's loss in its new slot, to compare with its reference loss.
  permuted = np.empty(len(perm))
  permuted[perm] = losses[1]
  found, change = _violation(
    "permute", -1, "", np.flatnonzero(real), before, permuted, rtol, atol
  )
  if found:
    slot = int(np.flatnonzero(perm == found.row)[0])
    violations.append(dataclasses.replace(found, replacement=f"slot {slot}"))
  max_change = max(max_change, change)
  for p, j in enumerate(probes):
    rows = np.flatnonzero(real & (np.arange(len(perm)) != j))
    found, change = _violation(
      "replace", j, replacements[p], rows, before, losses[2 + p], rtol, atol
    )
    violations += [found] if found else []
    max_change = max(max_change, change)
  return violations, max_change


def assert_per_example(
  batched_loss: BatchedLoss, params, batch, **kwargs
) -> PerExampleReport:
  """:func:`check_per_example`, raising if the loss mixes examples.

  Takes the same arguments. Meant for a runner's start-up, on public or
  synthetic inputs, before any private data is touched.

  Returns:
    The passing :class:`PerExampleReport`.

  Raises:
    CrossExampleDependenceError: (a ``ValueError``) naming, for each failed
      probe, which replaced example moved whose loss and by how much.
  """
  report = check_per_example(batched_loss, params, batch, **kwargs)
  if not report.ok:
    raise CrossExampleDependenceError(report)
  return report
