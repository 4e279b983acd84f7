"""PAZO-M and PAZO-P (and P'): zeroth order with public data.

Gong & Li, "Private Zeroth-Order Optimization with Public Data" (PAZO). Each
method composes the shared primitives: public directions
(:mod:`zoprivacy.zo.directions`), loss queries at perturbed parameters
(:mod:`zoprivacy.zo.queries`), per-example clipping
(:mod:`zoprivacy.mechanisms.clipping`), masked sums and noise
(:mod:`zoprivacy.mechanisms.noise`) and the public gradients of
:mod:`zoprivacy.estimators.public_data`.

==========  =============================================  ===============
factory     update returned (optax convention, minimised)  privatized part
==========  =============================================  ===============
``pazo_m``  ``a g_pub + (1 - a) g~/q``  (Alg. 1 l. 13)     ``q`` scalars
``pazo_p``  ``g~/q = (1/q) sum_j s_j G u_j`` (Alg. 2)      ``q`` scalars
==========  =============================================  ===============

Privacy: every method releases, per step, one Gaussian mechanism on a
Poisson-sampled private batch (``p = B/n``). PAZO's ``q`` (or ``k + 1``)
queries on one batch each get noise variance ``q C^2 sigma^2``, which is
exactly one Gaussian with ``noise_multiplier`` sigma (Dong et al. 2022
Cor. 3.3; ``docs/conventions.md`` §5), so ``privacy.step_event()`` is
``PoissonSampled(p, Gaussian(sigma))`` whatever ``q`` or ``k``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoprivacy.core import validation
from zoprivacy.estimators import base, public_data, registry, two_point
from zoprivacy.estimators.scalar_zo import scalar_privatization
from zoprivacy.privacy import privatization
from zoprivacy.zo import directions as directions_lib

_FD = "finite_difference"  # PAZO clips the finite difference (conventions §2).


def _finite_difference_query(
  privacy, *, directions, direction_prng, smoothing
) -> two_point.TwoPointQuery:
  """The private two-point query of a PAZO method (clip on ``fd_i``) with
  the mechanism and plan of the value ``privacy``."""
  return two_point.make_query(
    directions=directions,
    direction_prng=direction_prng,
    smoothing=smoothing,
    clip_target=_FD,
    privacy=privatization.privatize(privacy),
  )


def _estimator(
  compute, query, direction_key, physical_batch_size
) -> base.PrivateEstimator:
  return base.build_estimator(
    compute,
    direction_key=direction_key,
    privacy=query.privacy,
    num_released=query.num_queries,
    physical_batch_size=physical_batch_size,
  )


# ------------------------------------------------------------------- PAZO-M


@registry.estimator(
  "pazo_m",
  public_data="batch",
  learning_rate=0.3,
  privatize=scalar_privatization(),
)
def pazo_m(
  privacy,
  *,
  alpha: float = 0.5,
  directions: str = "sphere_quarter",
  smoothing: float = 1e-3,
  direction_key=0,
  direction_prng: str = "auto",
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """PAZO-M (PAZO Alg. 1): mix the public gradient with private DPZero.

  Lines 5-12: ``g~ = sum_{j=1}^q ((1/b) sum_i clip_C((f(x + l u_j; xi_i) -
  f(x - l u_j; xi_i)) / (2l)) + z_j) u_j`` with ``z_j ~ (1/b) N(0, q C^2
  sigma^2)`` and ``u_j`` uniform on ``d^{1/4} S^{d-1}`` (App. A.1: then
  ``E||g||^2 ~ ||grad f||^2``, so public and private parts have comparable
  norms). Line 13: the returned update is ``alpha g_pub + (1 - alpha) g~/q``,
  ``g_pub`` the gradient of the mean loss on ``public_batch``.

  Privacy, from the value ``privacy``: the public gradient is free; the
  ``q`` scalars (its ``num_queries``) are one Gaussian mechanism with its
  ``noise_multiplier`` (each gets std ``sqrt(q) sigma C``, ``C`` its clip
  on the per-example finite difference, default 1.0), sampled at ``p =
  b/n``; the noisy sums are divided by its expected batch size ``b``.
  Cost (Table 6): ``2q`` private forwards, one public forward+backward.

  Args:
    privacy: the privacy value (noise and calibration as in
      :func:`~zoprivacy.estimators.scalar_zo.dpzero`).
    smoothing: ``lambda``.
    alpha: mixing coefficient in ``[0, 1]`` (weight of the public gradient).
    directions: a sampler name; the paper's ``'sphere_quarter'`` by default.
    direction_key: PUBLIC PRNG key or integer seed of the directions; the
      noise comes from the state's SECRET noise key.
    direction_prng: as in :func:`~zoprivacy.estimators.scalar_zo.dpzero`.

  Per-example contract, secret noise keys and ``physical_batch_size``: see
  :mod:`zoprivacy.estimators.base`.
  """
  alpha = validation.unit_interval("alpha", alpha)
  query = _finite_difference_query(
    privacy,
    directions=directions,
    direction_prng=direction_prng,
    smoothing=smoothing,
  )

  def compute(params, args, dir_key, noise_key):
    public_batch = public_data.get_public_batch(args)
    g_private, scalars = two_point.zo_gradient(
      query, params, args, dir_key, noise_key
    )
    public_loss = public_data.public_loss_fn(args)
    g_pub = public_data.public_gradient(public_loss, params, public_batch)
    return public_data.combine(alpha, g_pub, g_private), scalars

  return _estimator(compute, query, direction_key, physical_batch_size)


# ------------------------------------------------------------------- PAZO-P


@registry.estimator(
  "pazo_p",
  public_data="batches",
  learning_rate=0.3,
  privatize=scalar_privatization(),
)
def pazo_p(
  privacy,
  *,
  num_public_batches: int = 4,
  orthonormalize: bool = True,
  smoothing: float = 1e-3,
  direction_key=0,
  direction_prng: str = "auto",
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """PAZO-P (PAZO Alg. 2) and PAZO-P' (``orthonormalize=False``).

  Line 4-5: ``G = [g_1, ..., g_k]``, the gradients of ``k`` public batches
  (``public_batches=``, stacked), orthonormalized by QR with the sign fix
  (PAZO-P) or only normalized (PAZO-P'). Lines 6-11: ``u_j`` uniform on
  ``sqrt(k) S^{k-1}`` (the ``'sqrt_dim'`` sphere sampler in ``R^k``), the
  perturbation direction is ``G u_j``, and each of the ``q`` finite
  differences is clipped at ``C`` and gets noise ``(1/b) N(0, q C^2
  sigma^2)``. Line 13: the update is ``g~/q = G ((1/q) sum_j s_j u_j)``,
  which lies in ``span(G)`` by construction.

  Privacy as PAZO-M (one Gaussian with ``noise_multiplier`` per step). Cost
  (Table 6): ``2q`` private forward passes, ``k`` public forward+backward.
  ``G`` is a ``k x d`` matrix in memory.

  Args:
    num_public_batches: ``k``; ``public_batches`` leaves have leading axis k.
    orthonormalize: True for PAZO-P, False for PAZO-P'.
    Others: as :func:`pazo_m`.

  Per-example contract, secret noise keys and ``physical_batch_size``: see
  :mod:`zoprivacy.estimators.base`.
  """
  k = validation.positive_int("num_public_batches", num_public_batches)
  if not isinstance(orthonormalize, bool):
    raise ValueError(f"orthonormalize must be a bool, got {orthonormalize!r}.")
  # The query carries the mechanism, smoothing and clip target; PAZO-P draws
  # its directions in span(G) itself, so the query has no direction sampler.
  query = _finite_difference_query(
    privacy,
    directions="sphere",
    direction_prng=direction_prng,
    smoothing=smoothing,
  )._replace(sampler=None, directions=None)
  coefficient_template = jnp.zeros([k], jnp.float32)

  def coefficients(key):
    """``u ~ Unif(sqrt(k) S^{k-1})`` (Alg. 2 line 7)."""
    return directions_lib.sphere(
      key, coefficient_template, "sqrt_dim", direction_prng
    )

  compute = _pazo_p_compute(query, k, orthonormalize, coefficients)
  return _estimator(compute, query, direction_key, physical_batch_size)


def _in_span(basis, c):
  """``G c`` for a coefficient vector ``c`` in ``R^k``."""
  return jax.tree.map(
    lambda g: jnp.tensordot(c.astype(g.dtype), g, axes=1), basis
  )


def _pazo_p_compute(query, k, orthonormalize, coefficients):
  """PAZO-P's ``compute(params, args, dir_key, noise_key)``: the public basis
  ``G`` (Alg. 2 lines 4-5), the ``q`` private scalars along ``G u_j`` (lines
  6-11) and the update ``G ((1/q) sum_j s_j u_j)`` (line 13)."""

  def compute(params, args, dir_key, noise_key):
    public_batches = public_data.get_public_batches(args, k)
    query_keys = jax.random.split(dir_key, query.num_queries)
    basis = public_data.public_subspace(
      public_data.public_gradients(
        public_data.public_loss_fn(args), params, public_batches
      ),
      orthonormalize,
    )
    direction = lambda kk: _in_span(basis, coefficients(kk))
    scalars = two_point.two_point_scalars(
      args, params, direction, query_keys, noise_key, query
    )
    mean_coefficients = jnp.mean(
      scalars[:, None] * jax.vmap(coefficients)(query_keys), axis=0
    )
    grad = _in_span(basis, mean_coefficients)
    return grad, scalars

  return compute
