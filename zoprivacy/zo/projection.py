"""Projection of the iterate onto an L2 ball, as an optax transformation.

Noisy-ZOGD (Chien, Chen & Li, eq. (3)) projects every iterate onto the
ball ``B_R = {w : ||w||_2 <= R}``. The projection is what bounds the
``W_inf`` distance of two adjacent runs by ``2R`` (Lemma 3.9) and so makes
the hidden-state bound of Thm 3.2 converge; it must come *after* the
optimizer in the chain, so that it acts on the new iterate:

    tx = optax.chain(estimator, optax.sgd(eta), project_l2_ball(R))

The norm is global over every leaf of the parameter pytree.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from optax import projections


class ProjectionState(NamedTuple):
  """Stateless."""


def tree_norm(tree) -> jax.Array:
  """Global L2 norm over all leaves, in float32 or wider."""
  return jnp.sqrt(
    sum(
      jnp.sum(jnp.square(x.astype(jnp.promote_types(x.dtype, jnp.float32))))
      for x in jax.tree.leaves(tree)
    )
  )


def project_l2_ball(radius: float) -> optax.GradientTransformation:
  """Returns ``updates' = Pi_{B_R}(params + updates) - params``.

  Applying ``updates'`` gives the projected iterate; inside the ball the
  projection is the identity and the updates pass through unchanged.

  Args:
    radius: ``R > 0``.

  Raises:
    ValueError: for a radius that is not a positive finite number.
  """
  if (
    not isinstance(radius, (int, float))
    or isinstance(radius, bool)
    or (not radius > 0 or not math.isfinite(radius))
  ):
    raise ValueError(
      f"The projection radius R must be a positive finite "
      f"number, got {radius!r}."
    )
  radius = float(radius)

  def init_fn(params):
    del params
    return ProjectionState()

  def update_fn(updates, state, params=None):
    if params is None:
      raise ValueError("project_l2_ball needs params in update().")
    new = optax.apply_updates(params, updates)
    inside = tree_norm(new) <= radius
    projected = projections.projection_l2_ball(new, radius)
    out = jax.tree.map(
      lambda u, p, w: jnp.where(inside, u, (w - p).astype(u.dtype)),
      updates,
      params,
      projected,
    )
    return out, state

  return optax.GradientTransformation(init_fn, update_fn)
