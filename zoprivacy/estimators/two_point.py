"""The two-point step shared by every zeroth-order estimator.

One composition of the shared primitives (DPZero eq. (2), DP-ZO Alg. 1):

1. draw ``q`` public directions ``u_j`` from the step's direction key
   (:mod:`zoprivacy.zo.directions`);
2. per example, query the loss at ``x + l u_j`` and ``x - l u_j``
   (:mod:`zoprivacy.zo.queries`);
3. per example, clip the two-point scalar
   (:mod:`zoprivacy.mechanisms.clipping`);
4. sum over real (unmasked) examples, add noise with the step's noise key,
   divide by the expected batch size (:mod:`zoprivacy.mechanisms.noise`);
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

from zoprivacy.core import physical_batches, validation
from zoprivacy.estimators import base
from zoprivacy.mechanisms import clipping
from zoprivacy.mechanisms import noise as mechanisms
from zoprivacy.zo import counter_directions, queries
from zoprivacy.zo import directions as directions_lib


class TwoPointQuery(NamedTuple):
  """What a two-point step fixes at construction (all static)."""

  sampler: Callable
  direction_prng: str
  num_queries: int
  smoothing: float
  clip_target: str
  mechanism: mechanisms.Mechanism
  privacy: base.Privatization | None
  directions: str

  def direction_fn(self, params):
    """``(k, after=(), scale=None) -> u``: the public direction of query
    key ``k``, like ``params``.

    With the counter hash each leaf of ``u`` is drawn where it is used,
    after the values ``after``
    (:func:`~zoprivacy.zo.counter_directions.counter_leaf_directions`):
    ``x + l u``, ``x - l u`` and the update each fuse the draw, and no full
    ``u`` is ever live; ``scale`` is the key's :meth:`direction_scales` entry.
    Threefry's draw costs several forward passes, so its ``u`` is drawn
    once and kept. The same function for both step structures
    (:meth:`first_use_directions`), so the update, and its replay, do not
    depend on the structure.
    """
    leaf_directions = self.leaf_directions(params)
    if leaf_directions is None:
      return lambda k, after=(), scale=None: self.sampler(k, params)
    treedef = jax.tree.structure(params)

    def regenerate(k, after=(), scale=None):
      leaf_u = leaf_directions(k, scale)
      return treedef.unflatten(
        [leaf_u(i, after) for i in range(treedef.num_leaves)]
      )

    return regenerate

  def leaf_directions(self, params):
    """``(k, scale=None) -> ((i, after) -> u_i)`` where ``u`` is drawn leaf
    by leaf (the counter hash,
    :func:`~zoprivacy.zo.counter_directions.counter_leaf_directions`);
    ``None`` where it is drawn whole."""
    prng = directions_lib.generator(self.direction_prng, params)
    if prng not in directions_lib.COUNTER_PRNGS:
      return None
    return lambda k, scale=None: counter_directions.counter_leaf_directions(
      self.directions, k, params, scale, prng
    )

  def first_use_directions(self, params):
    """:meth:`leaf_directions` where the two passes perturb each leaf at
    its first use (:func:`~zoprivacy.zo.directions.perturbs_leafwise`: the
    counter hash, and with ``'auto'`` a model of at least
    ``LEAFWISE_MIN_PARAMETERS`` on one CPU device); ``None`` where they perturb
    the whole tree at once."""
    if not directions_lib.perturbs_leafwise(self.direction_prng, params):
      return None
    return self.leaf_directions(params)

  def direction_scales(self, params, query_keys):
    """``[q]``: each query key's ``r / ||z||`` for counter-hash sphere
    directions (:func:`~zoprivacy.zo.counter_directions.counter_sphere_scale`),
    so that the norm pass runs once per query, not once per use of ``u``;
    ``None`` for every other direction."""
    prng = directions_lib.generator(self.direction_prng, params)
    if (
      prng not in directions_lib.COUNTER_PRNGS
      or self.directions not in directions_lib.SPHERE_RADII
    ):
      return None
    scale = lambda k: counter_directions.counter_sphere_scale(
      self.directions, k, params, prng
    )
    if query_keys.shape[0] == 1:
      return scale(query_keys[0])[None]
    return jax.lax.map(scale, query_keys)


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
    directions=directions,
  )


def two_point_scalars(
  args: base.LossArgs,
  params,
  direction,
  query_keys,
  noise_key,
  query,
  leaf_directions=None,
  scales=None,
) -> jax.Array:
  """Steps 2-4: the ``q`` released directional-derivative estimates ``s_j``.

  For each query key ``k_j``, ``u_j = direction(k_j)``; per example the
  two-point scalar (DPZero eq. (2) / DP-ZO Alg. 1 line 10) at ``x +- l u_j``
  (two batched forward passes). Private (``query.privacy`` given): clipped
  at ``mechanism.clip`` per example, summed over real examples, noised once
  (DPZero Alg. 2 line 3, DP-ZO Alg. 1 lines 13/15), divided by the expected
  batch size. Non-private: the mean over real examples (MeZO). With a
  :class:`~zoprivacy.mechanisms.noise.DiscreteMechanism`,
  ``args.discrete_noise`` holds the step's host-drawn integer noise. With
  ``leaf_directions`` (``query.leaf_directions(params)``) each leaf of
  ``u_j`` is drawn where the loss reads it, instead of ``direction(k_j)``
  whole; ``scales`` (``query.direction_scales``) holds each key's sphere
  scale.
  """
  smoothing, clip_target = query.smoothing, query.clip_target

  def one_query(k, scale=None):
    if leaf_directions is None:
      u = direction(k) if scale is None else direction(k, (), scale)
      return clipping.two_point_scalar(
        *queries.two_point_losses(args.loss, params, u, smoothing, args.batch),
        smoothing,
        clip_target,
      )
    # MeZO's layer-by-layer perturbation, both points side by side: each
    # leaf of x + l u and x - l u is formed where the loss first reads it,
    # from one draw of u (a large kernel's row blocks inside its products);
    # one layer's perturbed copies are live at a time.
    leaf_u = leaf_directions(k, scale)

    def perturb_both(i, leaf, after, lanes, start=0):
      u = leaf_u(i, after, start=start, shape=jnp.shape(leaf))
      signs = (smoothing, -smoothing)
      return tuple(queries.perturb(leaf, u, signs[k]) for k in lanes)

    # Over physical chunks, each chunk perturbing as it goes (not the
    # chunked args.loss: its one map would read every leaf at once).
    f_plus, f_minus = physical_batches.map_rows(
      lambda batch: queries.losses_perturbed_at_first_use(
        args.whole_loss, params, batch, perturb_both
      ),
      args.batch,
      args.physical_batch_size,
    )
    return clipping.two_point_scalar(f_plus, f_minus, smoothing, clip_target)

  if query_keys.shape[0] == 1:
    scale = None if scales is None else scales[0]
    per_example = one_query(query_keys[0], scale)[:, None]  # [B, 1]
  else:
    per_example = jax.lax.map(
      lambda k_and_scale: one_query(*k_and_scale), (query_keys, scales)
    ).T  # [B, q]
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


def average_of_directions(direction, query_keys, scalars, params, scales=None):
  """Step 5: ``(1/q) sum_j s_j u_j``, regenerating each ``u_j`` from its key
  (and its sphere scale, ``scales``, if given).

  With ``q = 1`` this is one fused ``s u``; otherwise a ``lax.scan`` keeps
  one direction in memory at a time.
  """
  num_queries = query_keys.shape[0]
  if num_queries == 1:
    scale = None if scales is None else scales[0]
    return jax.tree.map(
      lambda u: scalars[0].astype(u.dtype) * u,
      direction(query_keys[0], scalars, scale),
    )

  def accumulate(acc, key_scalar_scale):
    k, s, scale = key_scalar_scale
    u = direction(k, s, scale)
    return jax.tree.map(
      lambda a, x: a + (s / num_queries).astype(x.dtype) * x, acc, u
    ), None

  zeros = jax.tree.map(jnp.zeros_like, params)
  out, _ = jax.lax.scan(accumulate, zeros, (query_keys, scalars, scales))
  return out


def zo_gradient(query: TwoPointQuery, params, args, direction_key, noise_key):
  """Steps 1-5: ``((1/q) sum_j s_j u_j, s)``, the estimate and the release."""
  query_keys = jax.random.split(direction_key, query.num_queries)
  direction = query.direction_fn(params)
  scales = query.direction_scales(params, query_keys)
  scalars = two_point_scalars(
    args,
    params,
    direction,
    query_keys,
    noise_key,
    query,
    query.first_use_directions(params),
    scales,
  )
  # The update is a function of the released float32 scalars exactly (XLA
  # may not fold their scaling into u's): what a trajectory log replays.
  scalars = jax.lax.optimization_barrier(scalars)
  return released_update(query, params, query_keys, scalars, scales), scalars


def released_update(query, params, query_keys, scalars, scales=None):
  """Step 5 from the released scalars alone: ``(1/q) sum_j s_j u_j`` with
  each ``u_j`` regenerated from its key (DP-ZO Alg. 1 line 17). The training
  step and trajectory replay both compute it here; ``scales`` are the keys'
  :meth:`TwoPointQuery.direction_scales`, computed if not given."""
  if scales is None:
    scales = query.direction_scales(params, query_keys)
  return average_of_directions(
    query.direction_fn(params), query_keys, scalars, params, scales
  )


def two_point_estimator(
  query: TwoPointQuery, *, direction_key, physical_batch_size=None
) -> base.PrivateEstimator:
  """Steps 1-5 as an optax transformation (MeZO, DPZero, DP-ZO); the
  losses over physical chunks of ``physical_batch_size`` rows."""
  return base.build_estimator(
    lambda params, args, dir_key, noise_key: zo_gradient(
      query, params, args, dir_key, noise_key
    ),
    direction_key=direction_key,
    privacy=query.privacy,
    num_released=query.num_queries,
    physical_batch_size=physical_batch_size,
  )
