"""Per-example clipping: the sensitivity half of every private estimator.

Clipping bounds how much one example can move the quantity that is later
summed and noised. It is always applied per example, before summing.

Two conventions for *what* a zeroth-order threshold bounds coexist in the
papers (``docs/conventions.md`` §2), and the API names them explicitly:

* ``"finite_difference"`` (DPZero Alg. 2 line 3, PAZO Alg. 1-2): the clipped
  scalar is ``(f(x+lu) - f(x-lu)) / (2l)``.
* ``"raw_difference"`` (DP-ZO Alg. 1 line 10): the clipped scalar is
  ``f(x+lu) - f(x-lu)``; the noisy sum is divided by ``2l`` afterwards.

A DP-ZO threshold ``C`` therefore equals a DPZero threshold ``C / (2l)``.

Non-finite inputs never break the bound: a NaN contribution becomes 0 and
``+-inf`` becomes ``+-C``, so every clipped value lies in ``[-C, C]``.
"""

from __future__ import annotations

from typing import Literal

import chex
import jax
import jax.numpy as jnp

ClipTarget = Literal["finite_difference", "raw_difference"]
CLIP_TARGETS = ("finite_difference", "raw_difference")


def clip_scalars(values: jax.Array, threshold) -> jax.Array:
  """Clips each scalar to ``[-threshold, threshold]`` (DP-ZO Alg. 1 line 10).

  NaN maps to 0 (``jnp.clip`` alone would propagate NaN into the sum and
  destroy the sensitivity bound); infinities saturate at the threshold.
  """
  chex.assert_type(values, float)  # integer scores would clip silently
  clipped = jnp.clip(values, -threshold, threshold)
  return jnp.where(jnp.isnan(values), jnp.zeros_like(values), clipped)


def two_point_scalar(
  f_plus: jax.Array,
  f_minus: jax.Array,
  smoothing: float,
  clip_target: ClipTarget,
) -> jax.Array:
  """The per-example scalar a zeroth-order threshold applies to.

  ``finite_difference``: ``(f_plus - f_minus) / (2 smoothing)`` (DPZero eq. (2)).
  ``raw_difference``: ``f_plus - f_minus`` (DP-ZO Alg. 1 line 10).
  """
  chex.assert_equal_shape([f_plus, f_minus])  # one pair per example
  diff = f_plus - f_minus
  if clip_target == "finite_difference":
    return diff / (2.0 * smoothing)
  if clip_target == "raw_difference":
    return diff
  raise ValueError(
    f"Unknown clip_target {clip_target!r}; choose one of {CLIP_TARGETS}."
  )


def to_directional_derivative(
  value: jax.Array, smoothing: float, clip_target: ClipTarget
) -> jax.Array:
  """Converts a (noisy, averaged) clipped scalar to a directional derivative.

  The inverse scaling of :func:`two_point_scalar`: DP-ZO Alg. 1 lines 13/15
  divide the noisy sum by ``B * 2 phi``; DPZero's scalar already is one.
  """
  if clip_target == "raw_difference":
    return value / (2.0 * smoothing)
  return value


def clip_tree_per_example(per_example_tree, threshold):
  """Clips each example's vector (a pytree with a leading batch axis) in L2.

  DP-SGD (Abadi et al. 2016, Alg. 1): ``g_i * min(1, C / ||g_i||_2)`` with the
  norm taken over all leaves. Non-finite vectors are zeroed, so the bound
  holds for NaN/inf gradients too. Returns ``(clipped_tree, norms)``.
  """
  leaves = jax.tree.leaves(per_example_tree)
  chex.assert_equal_shape_prefix(leaves, 1)  # one batch axis on every leaf
  batch = leaves[0].shape[0]
  sq_norms = sum(
    jnp.sum(jnp.square(x.reshape(batch, -1).astype(jnp.float32)), axis=1)
    for x in leaves
  )
  norms = jnp.sqrt(sq_norms)
  finite = jnp.isfinite(norms)
  factor = jnp.where(
    finite, jnp.minimum(1.0, threshold / jnp.maximum(norms, 1e-30)), 0.0
  )

  def scale(x):
    f = factor.reshape((batch,) + (1,) * (x.ndim - 1)).astype(x.dtype)
    return jnp.where(f == 0, jnp.zeros_like(x), x * f)

  return jax.tree.map(scale, per_example_tree), norms
