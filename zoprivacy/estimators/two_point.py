"""The two-point step shared by every zeroth-order estimator.

One composition of the shared primitives (DPZero eq. (2), DP-ZO Alg. 1):

1. draw ``q`` public directions ``u_j`` from the step's direction key
   (:mod:`zoprivacy.directions`);
2. per example, query the loss at ``x + l u_j`` and ``x - l u_j``
   (:mod:`zoprivacy.queries`);
3. per example, clip the two-point scalar (:mod:`zoprivacy.clipping`);
4. sum over real (unmasked) examples, add noise with the step's noise key,
   divide by the expected batch size (:mod:`zoprivacy.mechanisms`);
5. return ``(1/q) sum_j s_j u_j``, regenerating ``u_j`` from its key.

Only the ``q`` scalars ``s_j`` depend on private data. With ``q = 1`` the
whole step is two batched forward passes plus one direction; for ``q > 1``
the queries run in a ``lax.map`` so memory stays at one direction at a time.
MeZO, DPZero and DP-ZO are this step; PAZO-M adds a public gradient to it
and PAZO-P replaces its directions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from zoprivacy import clipping, mechanisms, queries, validation
from zoprivacy import directions as directions_lib
from zoprivacy.estimators import base


class TwoPointQuery(NamedTuple):
  """What a two-point step fixes at construction (all static)."""

  sampler: Callable
  direction_prng: str
  num_queries: int
  smoothing: float
  clip_target: str
  mechanism: mechanisms.Mechanism
  privacy: base.Privatization | None

  def direction_fn(self, params):
    """``(k, after=()) -> u``: the public direction of query key ``k``,
    like ``params``.

    With the counter hash each call regenerates ``u`` where it is used,
    after the values ``after`` (:func:`~zoprivacy.directions.key_after`:
    XLA can neither hoist the draw nor merge the calls into one
    materialized ``u``): ``x + l u``, ``x - l u`` and the update each fuse
    the draw, and no full ``u`` is ever live. Threefry's draw costs several
    forward passes, so its ``u`` is drawn once and kept.
    """
    if self.direction_prng == "counter":
      return lambda k, after=(): self.sampler(
        directions_lib.key_after(k, after), params
      )
    return lambda k, after=(): self.sampler(k, params)


def make_query(
  *,
  directions: str,
  direction_prng: str,
  smoothing: float,
  clip_target: str,
  privacy: base.Privatization | None,
  num_queries: int = 1,
) -> TwoPointQuery:
  """Validates the zeroth-order hyperparameters; the mechanism comes from
  ``privacy`` (no noise when ``privacy`` is ``None``, MeZO)."""
  validation.one_of("directions", directions, directions_lib.DIRECTION_NAMES)
  validation.one_of("direction_prng", direction_prng, directions_lib.PRNG_IMPLS)
  validation.one_of("clip_target", clip_target, clipping.CLIP_TARGETS)
  mechanism = mechanisms.NoNoise() if privacy is None else privacy.mechanism
  return TwoPointQuery(
    sampler=directions_lib.get_sampler(directions, prng=direction_prng),
    direction_prng=direction_prng,
    num_queries=(
      validation.positive_int("num_queries", num_queries)
      if privacy is None
      else mechanism.num_queries
    ),
    smoothing=validation.positive_or_traced("smoothing", smoothing),
    clip_target=clip_target,
    mechanism=mechanism,
    privacy=privacy,
  )


def two_point_scalars(
  args: base.LossArgs, params, direction, query_keys, noise_key, query
) -> jax.Array:
  """Steps 2-4: the ``q`` released directional-derivative estimates ``s_j``.

  For each query key ``k_j``, ``u_j = direction(k_j)``; per example the
  two-point scalar (DPZero eq. (2) / DP-ZO Alg. 1 line 10) at ``x +- l u_j``
  (two batched forward passes). Private (``query.privacy`` given): clipped
  at ``mechanism.clip`` per example, summed over real examples, noised once
  (DPZero Alg. 2 line 3, DP-ZO Alg. 1 lines 13/15), divided by the expected
  batch size. Non-private: the mean over real examples (MeZO). With a
  :class:`~zoprivacy.mechanisms.DiscreteMechanism`, ``args.discrete_noise``
  holds the step's host-drawn integer noise.
  """
  smoothing, clip_target = query.smoothing, query.clip_target

  def one_query(k):
    if query.direction_prng != "counter":
      f_plus, f_minus = queries.two_point_losses(
        args.loss, params, direction(k), smoothing, args.batch
      )
    else:
      # MeZO's in-place walk: x + l u, then (x + l u) - 2 l u. The counter
      # hash draws u again for each use (see direction_fn); the second draw
      # comes after f(x + l u), so one perturbed copy of the parameters is
      # live and XLA writes x - l u over x + l u.
      plus = queries.perturb(params, direction(k), smoothing)
      f_plus = args.loss(plus, args.batch)
      minus = queries.perturb(plus, direction(k, f_plus), -2.0 * smoothing)
      f_minus = args.loss(minus, args.batch)
    return clipping.two_point_scalar(f_plus, f_minus, smoothing, clip_target)

  if query_keys.shape[0] == 1:
    per_example = one_query(query_keys[0])[:, None]  # [B, 1]
  else:
    per_example = jax.lax.map(one_query, query_keys).T  # [B, q]
  return release_scalars(
    per_example, args.mask, noise_key, query, args.discrete_noise
  )


def release_scalars(
  per_example, mask, noise_key, query: TwoPointQuery, discrete_noise=None
) -> jax.Array:
  """Steps 3-4 on the per-example two-point scalars ``[B, q]``.

  Private (``query.privacy`` given): clipped at ``mechanism.clip``, summed
  over the real examples, noised once by ``mechanism.privatize_sum`` and
  divided by the expected batch size (DPZero Alg. 2 line 3, DP-ZO Alg. 1
  lines 13/15). Non-private (MeZO): the mean over the real examples. Then
  scaled to directional derivatives for the clip target.
  """
  per_example = per_example.astype(jnp.float32)
  if query.privacy is not None:
    clipped = clipping.clip_scalars(per_example, query.mechanism.clip)
    noisy_sum = query.mechanism.privatize_sum(
      noise_key, clipped, mask, discrete_noise
    )
    mean = noisy_sum / query.privacy.expected_batch_size
  else:
    if mask is None:
      count = per_example.shape[0]
    else:
      count = jnp.maximum(jnp.sum(mask.astype(jnp.float32)), 1.0)
    mean = mechanisms.masked_sum(per_example, mask) / count
  return clipping.to_directional_derivative(
    mean, query.smoothing, query.clip_target
  )


def average_of_directions(direction, query_keys, scalars, params):
  """Step 5: ``(1/q) sum_j s_j u_j``, regenerating each ``u_j`` from its key.

  With ``q = 1`` this is one fused ``s u``; otherwise a ``lax.scan`` keeps
  one direction in memory at a time.
  """
  num_queries = query_keys.shape[0]
  if num_queries == 1:
    return jax.tree.map(
      lambda u: scalars[0].astype(u.dtype) * u,
      direction(query_keys[0], scalars),
    )

  def accumulate(acc, key_and_scalar):
    k, s = key_and_scalar
    u = direction(k, s)
    return jax.tree.map(
      lambda a, x: a + (s / num_queries).astype(x.dtype) * x, acc, u
    ), None

  zeros = jax.tree.map(jnp.zeros_like, params)
  out, _ = jax.lax.scan(accumulate, zeros, (query_keys, scalars))
  return out


def zo_gradient(query: TwoPointQuery, params, args, direction_key, noise_key):
  """Steps 1-5: ``((1/q) sum_j s_j u_j, s)``, the estimate and the release."""
  query_keys = jax.random.split(direction_key, query.num_queries)
  direction = query.direction_fn(params)
  scalars = two_point_scalars(
    args, params, direction, query_keys, noise_key, query
  )
  # The update is a function of the released float32 scalars exactly (XLA
  # may not fold their scaling into u's): what a trajectory log replays.
  scalars = jax.lax.optimization_barrier(scalars)
  return average_of_directions(direction, query_keys, scalars, params), scalars


def two_point_estimator(
  query: TwoPointQuery, *, direction_key
) -> base.PrivateEstimator:
  """Steps 1-5 as an optax transformation (MeZO, DPZero, DP-ZO)."""
  return base.build_estimator(
    lambda params, args, dir_key, noise_key: zo_gradient(
      query, params, args, dir_key, noise_key
    ),
    direction_key=direction_key,
    privacy=query.privacy,
    num_released=query.num_queries,
  )
