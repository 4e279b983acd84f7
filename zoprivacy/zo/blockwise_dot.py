"""A large dense kernel perturbed block by block of rows inside its
product: ``x @ (W + l U)`` for the two points of a zeroth-order step,
without forming a perturbed copy of ``W``.

Used by :func:`zoprivacy.zo.queries.losses_perturbed_at_first_use` for a
kernel that the loss reads only through one ``x @ W``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.extend import core as jax_core

from zoprivacy.zo import counter_positions

# On one device, a dense kernel of at least DOT_BLOCK_MIN_ELEMENTS, read
# only by one ``x @ W`` (a ``dot_general`` contracting its first axis), is
# perturbed block by block of rows inside that product. At most
# DOT_BLOCK_ELEMENTS (2 MiB of float32), and at most a quarter of the
# kernel, are live at once: each pass's perturbed block, the block's
# ``l U`` that they share and the next block's, drawn one iteration ahead
# (so two passes take blocks of a quarter of it, one pass a third), or the
# fewest larger blocks that keep the loop at _MAX_DOT_BLOCKS iterations.
# Fewer, larger products are faster (the wide MLP's counter step at batch
# 64: 2^19 elements 0.90x the time of 2^18, for 1 MiB more). Not with
# several devices: there the kernel may be sharded (FSDP), and XLA would
# gather a row block's whole kernel onto every device (8 devices, wide
# MLP: 3.7 -> 22.4 MiB each).
DOT_BLOCK_MIN_ELEMENTS = 2**20
DOT_BLOCK_ELEMENTS = 2**19
_MAX_DOT_BLOCKS = 64
# Where both passes read the same x (shared_input_dot), one block of l U is
# live at a time, and it takes half the budget: with all of it (blocks of
# 196 rows on the wide MLP's first kernel) the running sum, x @ W and the
# two outputs live beside it raised the donated step's peak at batch 64 from
# 20.4 to 21.9 MiB, for no measured speed (blocks of 98 rows: 20.4 MiB).
_SHARED_INPUT_SHARE = 2


def is_pending(v, pending) -> bool:
  return not isinstance(v, jax_core.Literal) and v in pending


def dot_rows_per_block(eqn, pending, leaves, uses, passes, shared_input=False):
  """``(i, rows per block)`` for the blockwise ``x @ (W + l U)`` of
  ``eqn``, or ``None`` where it does not apply: ``W`` an unperturbed
  float32 matrix leaf ``i``, the product's right operand (the left one not
  a leaf), contracted over its first axis with no batch axes, read nowhere
  else, on one device. ``shared_input``: ``x`` is the same for both passes
  (:func:`shared_input_dot`, one block of ``l U`` live at a time)."""
  if (
    eqn.primitive.name != "dot_general"
    or not is_pending(eqn.invars[1], pending)
    or is_pending(eqn.invars[0], pending)
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
  budget = min(DOT_BLOCK_ELEMENTS, leaf.size // 4)
  live = _SHARED_INPUT_SHARE if shared_input else passes + 2
  most = budget // live // cols
  divisors = [r for r in range(1, rows + 1) if rows % r == 0]
  block = max(r for r in divisors if r <= max(most, 1))
  if rows // block > _MAX_DOT_BLOCKS:  # fewer, larger blocks (4096 x 1536)
    block = min(r for r in divisors if rows // r <= _MAX_DOT_BLOCKS)
  return (i, block) if block < rows else None


class Lanes(tuple):
  """One value per pass (``x + l u`` and ``x - l u``) of a value that
  depends on the perturbed parameters; any other value is shared."""


def lane(value, k):
  return value[k] if isinstance(value, Lanes) else value


def blockwise_perturbed_dot(
  eqn, lhs, leaf, i, perturb_lanes, after, block, passes
):
  """``dot_general(lhs, W + l U)`` for each pass as a sum over blocks of
  ``block`` rows of ``W``: each block of every pass's ``W + l U`` lives
  only inside its products, so no perturbed copy of the kernel is formed
  (the sum runs in another order: float rounding).

  The block's ``l U`` is drawn once for all passes, as
  ``perturb_lanes(i, zeros, after, (0,), start=...)`` (the first point's
  perturbation of a zero block; the second point's is its negation, the
  same bits as ``W - l U``), and it reaches the passes through the loop's
  carry: drawn one iteration ahead, it is a buffer the passes both read.
  Formed inside the iteration that uses it, XLA's CPU compiler fuses the
  whole draw into each pass's ``W +- l U`` and draws every block twice.
  """
  (lhs_contract,), _ = eqn.params["dimension_numbers"][0]
  ndim = jnp.ndim(lane(lhs, 0))
  moved = [jnp.moveaxis(lane(lhs, k), lhs_contract, -1) for k in range(passes)]
  cols = leaf.shape[1]
  count = leaf.shape[0] // block
  params = dict(eqn.params)
  params["dimension_numbers"] = (((ndim - 1,), (0,)), ((), ()))
  zeros = jnp.zeros((block, cols), leaf.dtype)

  def direction(j):
    start = counter_positions.row_offset(j, block * cols, leaf.size)
    return perturb_lanes(i, zeros, after, (0,), start=start)[0]

  def products(j, step):
    first = j * block
    rows = jax.lax.dynamic_slice_in_dim(leaf, first, block, 0)
    lanes = (rows + step, rows - step)
    return tuple(
      eqn.primitive.bind(
        jax.lax.dynamic_slice_in_dim(moved[k], first, block, ndim - 1),
        lanes[k],
        **params,
      )
      for k in range(passes)
    )

  def add(totals, j, step):
    return tuple(t + p for t, p in zip(totals, products(j, step)))

  # The first block's products start the sums: buffers of their own that
  # the loop adds into in place. A zeros start would be one constant shared
  # by the loops, and each loop would copy it first (wide MLP, batch 256: a
  # compiled peak of 24.6 MiB against 28.5).
  # The last iteration draws its own block again (a block the loop does
  # not use): adding the last block after the loop instead keeps one more
  # output of each pass live (wide MLP, batch 256: +1.2 MiB).
  def body(j, carry):
    totals, step = carry
    return add(totals, j, step), direction(jnp.minimum(j + 1, count - 1))

  totals = products(0, direction(0))
  if count > 1:
    totals, _ = jax.lax.fori_loop(1, count, body, (totals, direction(1)))
  return Lanes(totals)


def shared_input_dot(eqn, lhs, leaf, i, perturb_lanes, after, block):
  """``x @ (W + l U)`` and ``x @ (W - l U)`` for an ``x`` both passes read
  (the batch itself at the first layer): ``x @ W`` once, one plain product,
  plus and minus ``x @ (l U)``, summed over blocks of ``block`` rows of
  ``U``, each block drawn (``perturb_lanes(i, zeros, after, (0,),
  start=...)``, as :func:`blockwise_perturbed_dot`) and multiplied once. No
  perturbed copy of ``W`` is formed, not even a block, and the kernel is
  read by one product, not two; the values differ from the materialized
  perturbation's by float rounding (the perturbation's product is rounded
  apart from ``x @ W``, not into ``W + l U``).
  """
  (lhs_contract,), _ = eqn.params["dimension_numbers"][0]
  ndim = jnp.ndim(lhs)
  moved = jnp.moveaxis(lhs, lhs_contract, -1)
  params = dict(eqn.params)
  params["dimension_numbers"] = (((ndim - 1,), (0,)), ((), ()))
  cols = leaf.shape[1]
  count = leaf.shape[0] // block
  zeros = jnp.zeros((block, cols), leaf.dtype)

  def product(j):
    start = counter_positions.row_offset(j, block * cols, leaf.size)
    step = perturb_lanes(i, zeros, after, (0,), start=start)[0]
    rows = jax.lax.dynamic_slice_in_dim(moved, j * block, block, ndim - 1)
    return eqn.primitive.bind(rows, step, **params)

  plain = eqn.primitive.bind(lhs, leaf, **eqn.params)
  total = product(0)
  if count > 1:
    total = jax.lax.fori_loop(1, count, lambda j, t: t + product(j), total)
  return Lanes((plain + total, plain - total))
