"""Leaf-by-leaf counter-hash directions: each leaf's ``u`` drawn where it is
used, and the sphere's norm computed in chunks without the whole ``u``.

The same draws as :func:`zoprivacy.zo.directions.get_sampler` with the counter
generator (tested), split by leaf so a step never holds a whole direction.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from zoprivacy.core import low_precision
from zoprivacy.zo import counter_positions
from zoprivacy.zo.directions import (
  SPHERE_RADII,
  PyTree,
  key_after,
  leaf_slice,
  sphere_radius,
  tree_size,
)

_NORM_CHUNK = 1 << 16


def _leaf_sum_of_squares(
  key: jax.Array, leaf: int, like, prng: str
) -> jax.Array:
  """``sum(z_i^2)`` over the Gaussian leaf ``leaf`` of ``key`` (drawn in
  ``like``'s compute dtype, as the leaf's ``u``; summed in float32), in chunks of 2^16 elements (a
  quarter of a smaller leaf, at least 1024).

  A loop over :func:`leaf_slice` chunks: XLA's CPU compiler hands a
  reduction to a library kernel (YNNPACK) that needs its inputs in memory,
  so a chunk's squares are materialized instead of a leaf's.
  """
  size = math.prod(jnp.shape(like))
  dtype = low_precision.compute_dtype(like)
  chunk = min(_NORM_CHUNK, max(1024, size // 4))
  full, rest = divmod(size, chunk)

  def chunk_sum(start, length):
    # Drawn as rows of 128 where the length allows: XLA's CPU loop then
    # vectorizes the positions (a flat chunk builds them lane by lane),
    # about 0.8x the time. The same elements either way.
    rows = (length // 128, 128) if length % 128 == 0 else (length,)
    z = leaf_slice("gaussian", key, leaf, rows, dtype, start=start, prng=prng)
    # An identity on float32 that XLA keeps: the reduction's library
    # kernel then reads one buffer of squares (not the transform's last
    # products), about 0.75x the time.
    squares = jax.lax.reduce_precision(
      jnp.square(z.astype(jnp.float32)), exponent_bits=8, mantissa_bits=23
    )
    return jnp.sum(squares)

  total = jnp.zeros((), jnp.float32)
  if full:
    start = lambda j: counter_positions.row_offset(j, chunk, size)
    total = jax.lax.fori_loop(
      0, full, lambda j, acc: acc + chunk_sum(start(j), chunk), total
    )
  if rest:
    total = total + chunk_sum(full * chunk, rest)
  return total


def counter_sphere_scale(
  name: str, key: jax.Array, params: PyTree, prng: str = "counter"
):
  """``r / ||z||`` of the counter-hash sphere direction ``name`` of ``key``
  (Marsaglia, as in :func:`sphere`): ``z`` is the Gaussian draw of the
  counter hash ``prng``.

  The norm is a reduction over the leaves' draws, one leaf after another
  and 2^16 elements at a time (one chunk of ``z`` is live). A step computes
  it once per query and shares it between its two passes and its update.
  """
  leaves = jax.tree.leaves(params)
  sq_norm = jnp.zeros((), jnp.float32)
  for i in range(len(leaves)):  # leaf by leaf, chunk by chunk
    sq_norm = sq_norm + _leaf_sum_of_squares(
      key_after(key, sq_norm), i, leaves[i], prng
    )
  radius = sphere_radius(SPHERE_RADII[name], tree_size(params))
  return radius * jax.lax.rsqrt(sq_norm)


def counter_leaf_directions(
  name: str, key: jax.Array, params: PyTree, scale=None, prng="counter"
):
  """``(i, after) -> u_i``: flattened leaf ``i`` of ``get_sampler(name,
  prng=prng)(key, params)`` (``prng`` a counter hash), drawn alone after
  the values ``after``
  (:func:`key_after`), so that it fuses into its one consumer.
  ``(i, after, start=s, shape=sh)`` draws only the elements of that leaf
  from flat position ``s`` on, in shape ``sh`` (a block of rows).

  Gaussian and Rademacher leaves are :func:`leaf_slice`. A sphere leaf is
  the Gaussian leaf times the step's ``r / ||z||``: ``scale`` if given
  (:func:`counter_sphere_scale` of the same key), else computed here; every
  leaf is drawn after it, so that no draw is merged with the norm's. The
  same draws as the whole-tree sampler; the norm is summed in another order
  (float32 rounding).
  """
  leaves = jax.tree.leaves(params)
  coordinates = "gaussian" if name in SPHERE_RADII else name

  def draw(i, after, *, start=0, shape=None):
    leaf = leaves[i]
    return leaf_slice(
      coordinates,
      key_after(key, after),
      i,
      jnp.shape(leaf) if shape is None else shape,
      # float32 for a 16-bit leaf: its points and update are float32
      low_precision.compute_dtype(leaf),
      start=start,
      prng=prng,
    )

  if name not in SPHERE_RADII:
    return draw
  if scale is None:
    scale = counter_sphere_scale(name, key, params, prng)

  def sphere_leaf(i, after, *, start=0, shape=None):
    z = draw(i, (after, scale), start=start, shape=shape)
    return (z * scale).astype(z.dtype)

  return sphere_leaf
