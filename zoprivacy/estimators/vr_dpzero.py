"""VR-DPZero: DPZero with a recursive (STORM) control variate, an estimator
with state of its own.

Step ``t`` keeps a reference point, the previous iterate ``x_{t-1}``, and
its reference estimate, the previous output ``v_{t-1}``. With the step's
PUBLIC direction ``u_t`` and, per example, the two-point finite difference
``g_i(x) = (f(x + l u_t; xi_i) - f(x - l u_t; xi_i)) / (2 l)`` (DPZero eq.
(2)) at both points, on the same batch and the same direction:

  c_i = clip_C(g_i(x_t) - beta g_i(x_{t-1}))
  s_t = (sum_i c_i + z_t) / B           (z_t: the value's noise, std sigma C)
  v_t = s_t u_t + beta v_{t-1}          (the output; v_0 = s_0 u_0)

This is STORM's momentum-based variance reduction (Cutkosky & Orabona 2019,
Alg. 1: ``d_t = grad f(x_t; xi_t) + (1 - a)(d_{t-1} - grad f(x_{t-1};
xi_t))``, ``beta = 1 - a``) with each stochastic gradient replaced by its
two-point estimate along ``u_t``: an SVRG-style control variate
(zeroth-order SVRG, Liu et al. 2018) whose reference point is refreshed at
every step from what the previous steps released. Without clipping and
noise ``E[v_t] - grad F(x_t) = beta (E[v_{t-1}] - grad F(x_{t-1}))`` (the
smoothed loss; ``E[u u^T] = I``): the recursion is unbiased from ``v_0``.
Near convergence ``g_i(x_t) - beta g_i(x_{t-1})`` is about ``(1 - beta)``
times DPZero's finite difference: a clip ``C`` that much smaller keeps the
signal at less noise, which is the method's point. At DPZero's clip the
noise of ``v_t`` is ``1 / sqrt(1 - beta^2)`` times DPZero's (2.3 at 0.9).

Privacy (what is released, how it is accounted): one scalar per step,
``s_t`` (``EstimatorState.released``). Each example adds one ``c_i`` with
``|c_i| <= C`` to the sum: sensitivity ``C`` under add/remove (``2C``
replace-one, the value's ``neighboring``). Its mechanism, plan and
calibration are DPZero's (one query; a Poisson-subsampled Gaussian, or the
exact discrete Gaussian on the value's grid by default), one step of the
plan per step, composed by the ledger. The reference point ``x_{t-1}`` and
the reference estimate ``v_{t-1}`` are functions of the public directions
and of ``s_0 .. s_{t-1}`` alone: post-processing of releases already
counted (adaptive composition), so the reference costs no release of its
own. Nothing else computed from private data enters the state
(``EstimatorState.method``: ``x_{t-1}``, ``v_{t-1}`` and ``beta``'s
switch), and it is checkpointed and restored with the rest: a resumed run
continues the recursion exactly.

Cost per step: four batched forward passes (two per point) and three
parameter-sized trees held beyond the parameters (``u_t``, ``x_{t-1}``,
``v_{t-1}``); ``u_t`` is drawn whole.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from zoprivacy.estimators import base, registry, scalar_zo, two_point
from zoprivacy.mechanisms import clipping
from zoprivacy.privacy import privatization
from zoprivacy.zo import queries


class ReferenceState(NamedTuple):
  """VR-DPZero's own state (the ``method`` slot of the estimator state).

  Attributes:
    point: the reference point ``x_{t-1}``, the parameters the previous
      step was taken at (at ``init``, the initial parameters).
    estimate: the reference estimate ``v_{t-1}``, the previous output
      (zeros at ``init``), like the parameters.
    weight: ``beta`` on the reference (``0.0`` until the first step).
  """

  point: Any
  estimate: Any
  weight: jax.Array


# Its default clip: (1 - beta) DPZero's 1.0 at the default beta = 0.9.
DEFAULT_CLIP = 0.1


@registry.estimator(
  "vr_dpzero",
  learning_rate=0.02,
  privatize=scalar_zo.scalar_privatization(DEFAULT_CLIP),
)
def vr_dpzero(
  privacy,
  *,
  smoothing: float = 1e-3,
  directions: str = "sphere",
  reference_weight: float = 0.9,
  direction_key=0,
  direction_prng: str = "auto",
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """VR-DPZero (module docstring): DPZero's release on the per-example
  control-variate difference, ``v_t = s_t u_t + beta v_{t-1}``.

  Args:
    privacy: the privacy value (:class:`zoprivacy.Privacy`); its ``clip``
      ``C`` (default 0.1) bounds ``g_i(x_t) - beta g_i(x_{t-1})``, its
      ``num_queries`` must be 1. Noise, sampling, calibration: as
      :func:`~zoprivacy.estimators.scalar_zo.dpzero`'s.
    smoothing: ``l``.
    directions: a name from :data:`zoprivacy.zo.directions.DIRECTION_NAMES`
      (``E[u u^T] = I`` for the recursion to be unbiased: 'sphere',
      'gaussian').
    reference_weight: ``beta`` in ``[0, 1)`` (STORM's ``1 - a``); 0 is
      DPZero.
    direction_key: PUBLIC PRNG key or integer seed of the directions (step
      ``t``'s ``u_t`` is DPZero's at the same key).
    direction_prng: as :func:`~zoprivacy.estimators.scalar_zo.dpzero`'s.
    physical_batch_size: rows per physical chunk of the forward passes.
  """
  query = _query(
    privacy, reference_weight, smoothing, directions, direction_prng
  )
  return base.build_estimator(
    functools.partial(_step, query, reference_weight),
    direction_key=direction_key,
    privacy=query.privacy,
    physical_batch_size=physical_batch_size,
    method_init=_initial_reference,
  )


def _step(query, beta, params, args, dir_key, noise_key, reference):
  """One step: ``(v_t, [s_t], ReferenceState(x_t, v_t, beta))``."""
  u = query.direction_fn(params)(jax.random.split(dir_key, 1)[0])
  differences = _finite_differences(args, params, reference, u, query.smoothing)
  scalars = two_point.release_scalars(  # clip, noise, / B: the release
    differences[:, None], args.mask, noise_key, query, args.discrete_noise
  )
  s = jax.lax.optimization_barrier(scalars)[0]
  estimate = jax.tree.map(  # in the parameters' dtype, like v_{t-1}
    lambda u_, v: (s * u_ + reference.weight * v).astype(v.dtype),
    u,
    reference.estimate,
  )
  weight = jnp.full([], beta, jnp.float32)
  return estimate, scalars, ReferenceState(params, estimate, weight)


def _query(privacy, beta, smoothing, directions, direction_prng):
  """DPZero's two-point query and privatization (clip default 0.1); refuses
  a ``beta`` outside ``[0, 1)`` (unless ``optax.inject_hyperparams``
  injects it as an array) and more than one query."""
  if not isinstance(beta, jax.Array) and not 0.0 <= float(beta) < 1.0:
    raise ValueError(f"reference_weight must be in [0, 1), got {beta}.")
  privatized = privatization.privatize(privacy, clip=DEFAULT_CLIP)
  if privatized.mechanism.num_queries != 1:
    raise ValueError(
      "vr_dpzero releases one scalar per step along one direction: its "
      "privacy value's num_queries must be 1, got "
      f"{privatized.mechanism.num_queries}."
    )
  return two_point.make_query(
    directions=directions,
    direction_prng=direction_prng,
    smoothing=smoothing,
    clip_target="finite_difference",
    privacy=privatized,
  )


def _initial_reference(params) -> ReferenceState:
  """``x_{-1} = x_0`` (a copy: a state must not share the parameters'
  buffers, which a training step donates), ``v_{-1} = 0``, ``beta = 0``."""
  return ReferenceState(
    point=jax.tree.map(jnp.copy, params),
    estimate=jax.tree.map(jnp.zeros_like, params),
    weight=jnp.zeros([], jnp.float32),
  )


def _finite_differences(args, params, reference, u, smoothing) -> jax.Array:
  """``[B]``: ``g_i(x_t) - beta g_i(x_{t-1})`` along ``u``, in float32 (four
  batched forward passes over the step's physical chunks)."""

  def finite_difference(point):
    f_plus, f_minus = queries.two_point_losses(
      args.loss, point, u, smoothing, args.batch
    )
    return clipping.two_point_scalar(
      f_plus.astype(jnp.float32),
      f_minus.astype(jnp.float32),
      smoothing,
      "finite_difference",
    )

  here = finite_difference(params)
  there = finite_difference(reference.point)
  return here - reference.weight * there
