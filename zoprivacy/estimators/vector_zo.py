"""DPGD-0th (DPZero Alg. 1): zeroth-order gradients with *vector* noise.

The straightforward private ZO method that DPZero shows to be dimension
dependent: per-example zeroth-order gradients ``g_i = fd_i u`` are clipped in
L2 and summed, then ``d``-dimensional Gaussian noise is added. It exists as
the baseline that shows why privatizing only the scalar matters.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoprivacy.core import validation
from zoprivacy.estimators import base, registry
from zoprivacy.estimators.dp_sgd import privatization, vector_privatization
from zoprivacy.mechanisms import clipping
from zoprivacy.mechanisms import noise as mechanisms
from zoprivacy.zo import directions as directions_lib
from zoprivacy.zo import queries


@registry.estimator(
  "dpgd_zeroth", learning_rate=0.02, privatize=vector_privatization
)
def dpgd_zeroth(
  privacy,
  *,
  smoothing: float = 1e-3,
  directions: str = "sphere",
  direction_prng: str = "threefry",
  direction_key=0,
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """DPGD-0th, DPZero Alg. 1 lines 2-3.

  ``x <- x - a ((1/B) sum_i clip_C(g_l(x; xi_i)) + z)``, ``z ~ N(0, (sigma C /
  B)^2 I_d)``, with ``g_l(x; xi) = (f(x+lu; xi) - f(x-lu; xi)) / (2l) u``.

  Every per-example vector is parallel to ``u``, so its L2 clip is exactly
  the clip of the scalar ``fd_i`` at ``C / ||u||``: ``clip_C(fd_i u) =
  clip_scalar(fd_i, C/||u||) u``. This computes the same vectors without
  materializing ``B`` of them. The noise is isotropic in all ``d``
  coordinates, which is what makes this baseline dimension dependent. By
  default (``noise='exact'``) it is exact vector noise: the per-example
  scalars and the direction are put on an integer lattice
  (:meth:`~zoprivacy.secret_noise.vector_discrete_mechanism.VectorDiscreteGaussianMechanism.privatize_direction`).

  Privacy, from the value ``privacy`` (``C`` its clip, default 1.0):
  sensitivity ``C`` (L2, add/remove; ``2C`` replace-one), noise std
  ``sigma C`` per coordinate, event ``GaussianDpEvent(sigma)`` sampled at
  ``p = B/n``: the same accounting as DP-SGD.

  Per-example contract, secret noise keys and ``physical_batch_size``: see
  :mod:`zoprivacy.estimators.base`.
  """
  smoothing = validation.positive("smoothing", smoothing)
  validation.one_of("directions", directions, directions_lib.DIRECTION_NAMES)
  validation.one_of("direction_prng", direction_prng, directions_lib.PRNG_IMPLS)
  privacy = privatization(privacy)
  exact = privacy.plan.noise_kind == "discrete_vector"
  sampler = directions_lib.get_sampler(directions, prng=direction_prng)

  def gradient(params, args, direction_key, noise_key):
    u = sampler(direction_key, params)
    f_plus, f_minus = queries.two_point_losses(
      args.loss, params, u, smoothing, args.batch
    )
    fd = clipping.two_point_scalar(
      f_plus, f_minus, smoothing, "finite_difference"
    ).astype(jnp.float32)
    u_norm = jnp.sqrt(
      sum(
        jnp.sum(jnp.square(x.astype(jnp.float32))) for x in jax.tree.leaves(u)
      )
    )
    clipped = clipping.clip_scalars(fd, privacy.mechanism.clip / u_norm)
    if exact:  # the lattice: integer sensitivity proven per example
      noisy = privacy.mechanism.privatize_direction(
        noise_key, clipped * u_norm, args.mask, u
      )
      return jax.tree.map(lambda x: x / privacy.expected_batch_size, noisy)
    scalar_sum = mechanisms.masked_sum(clipped, args.mask)
    vector_sum = jax.tree.map(lambda x: scalar_sum.astype(x.dtype) * x, u)
    return base.noisy_mean(privacy, noise_key, vector_sum)

  return base.build_vector_estimator(
    gradient,
    direction_key=direction_key,
    privacy=privacy,
    physical_batch_size=physical_batch_size,
  )
