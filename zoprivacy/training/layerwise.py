"""Zeroth-order steps at inference-level memory for scanned, stacked layers.

The generic two-point step (:mod:`zoprivacy.estimators.two_point`) builds
``x + l u`` as a full pytree before each forward pass, and ``s u`` as a full
pytree before the update: at least one extra copy of the parameters is live.
For a model whose layers are one scan over parameters stacked on a leading
layer axis (``[L, ...]`` leaves, e.g. :class:`~zoprivacy.models.opt.
OPTForCausalLM`), this module perturbs each layer *inside* the scan body, as
the layer is used: the body receives the unperturbed layer and its index
``l`` and adds ``scale * u_l``, where ``u_l`` is layer ``l``'s slice of the
counter-hash direction (:func:`zoprivacy.zo.directions.leaf_slice` with
``start = l * layer_size``). The extra memory is one layer's worth:
compiled on CPU (jax 0.10.2) for a 16-layer OPT (hidden 256, float32), the
step's temporaries are 0.13x the parameters (2.1 layers, the same 2.1 with
8 layers; an inference pass alone holds 1.1) and its peak 1.13x, against
1.81x and 2.81x for the generic counter-hash dpzero step
(``tests/models/test_causal_lm_zo.py``). 16-bit float leaves are sliced
and perturbed in float32 one layer at a time, and updated in float32
within each leaf's one elementwise expression, stored stochastically
rounded from the step's public rounding key (:mod:`zoprivacy.zo.rounding`;
``docs/llm.md``, 16-bit weights).

The direction is THE direction of the generic step: leaf ``i`` is numbered
in the ``jax.tree.leaves`` order of the whole trainable tree and its
elements are drawn by the same counter hash, so a step here equals the
generic ``dpzero(direction_prng=...)`` step with the same counter hash
(``'counter2'`` by default, or ``'counter'``) followed by
``optax.sgd(learning_rate)`` with the same keys (tested).

The update ``x <- x - a (1/q) sum_j s_j u_j`` (DPZero Alg. 2 line 3, DP-ZO
Alg. 1 line 17) regenerates ``u_j`` inside one elementwise expression per
leaf; jitted with ``donate_argnums=0`` it overwrites the parameters in place.
The clipped per-example scalars, their noise and the division by the
expected batch size go through the estimators' own pieces
(:mod:`zoprivacy.mechanisms.clipping`, ``mechanism.privatize_sum``) and the
state is an :class:`~zoprivacy.estimators.base.EstimatorState` carrying the same
privacy plan, so accounting is unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from zoprivacy.core import low_precision, physical_batches, validation
from zoprivacy.estimators import base, registry, two_point
from zoprivacy.mechanisms import clipping
from zoprivacy.models.layer_perturbation import (  # noqa: F401 (re-exported)
  Perturbation,
  PerturbedLoss,
  leaf_numbers,
  perturbation_dtype,
  split_stacked,
)
from zoprivacy.privacy import plan as plan_lib
from zoprivacy.privacy import privatization
from zoprivacy.zo import directions as directions_lib
from zoprivacy.zo import rounding

SLICEABLE_DIRECTIONS = ("gaussian", "rademacher")


def descend(
  params,
  direction: str,
  query_keys,
  scalars,
  learning_rate,
  prng="counter",
  *,
  rounding_key=None,
):
  """``x - a (1/q) sum_j s_j u_j`` leaf by leaf, each ``u_j`` regenerated
  inside the leaf's one elementwise expression (no copy of ``u``) by the
  counter hash ``prng``.

  The arithmetic is that of :func:`~zoprivacy.estimators.two_point.
  average_of_directions` followed by ``optax.sgd``: ``s u`` (``q = 1``) or
  ``sum_j (s_j / q) u_j``, times ``-a``, added to ``x``. A 16-bit float
  leaf is updated in float32 and stored stochastically rounded with the
  step's public ``rounding_key`` (:func:`zoprivacy.zo.rounding.step_key`;
  required when ``params`` has such a leaf), as the generic step's
  :func:`zoprivacy.zo.rounding.apply_updates` stores it.
  """
  num_queries = query_keys.shape[0]
  numbers = leaf_numbers(params)
  if rounding_key is None and low_precision.has_narrow(params):
    raise ValueError(
      "descend on 16-bit float leaves needs the step's rounding_key "
      "(zoprivacy.zo.rounding.step_key of its direction key)."
    )

  def update(leaf, number):
    # A 16-bit float leaf is updated in float32 (its u as in the passes)
    # and stochastically rounded when stored.
    dtype = perturbation_dtype(leaf)
    # Each draw follows the released scalars, so that XLA cannot hoist it
    # above the forward passes and keep a full u alive.
    draw = lambda k: directions_lib.leaf_slice(
      direction,
      directions_lib.key_after(k, scalars),
      number,
      jnp.shape(leaf),
      dtype,
      prng=prng,
    )
    if num_queries == 1:
      grad = scalars[0].astype(dtype) * draw(query_keys[0])
    else:
      grad = jnp.zeros_like(leaf)
      for j in range(num_queries):
        grad = grad + (scalars[j] / num_queries).astype(dtype) * draw(
          query_keys[j]
        )
    value = leaf.astype(dtype) + (-learning_rate) * grad
    return rounding.store(leaf, value, rounding_key, number, after=scalars)

  return jax.tree.map(update, params, numbers)


class LayerwiseZO(NamedTuple):
  """A two-point step without parameter copies.

  ``init(params) -> state``: an :class:`~zoprivacy.estimators.base.
  EstimatorState` (public direction key, secret noise key, the plan).
  ``step(trainable, state, batch, frozen=None, mask=None,
  discrete_noise=None) -> (trainable, state)``: one SGD step; jit it with
  ``jax.jit(zo.step, donate_argnums=0)`` so ``trainable`` is updated in
  place. ``privacy_plan``: the plan of one step (as the estimators').
  """

  init: Callable
  step: Callable
  privacy_plan: plan_lib.PrivacyPlan
  query: two_point.TwoPointQuery


def layerwise_two_point(
  query: two_point.TwoPointQuery,
  *,
  directions: str,
  perturbed_loss: PerturbedLoss,
  learning_rate: float,
  direction_key=0,
  physical_batch_size: int | None = None,
) -> LayerwiseZO:
  """The two-point step of ``query`` with the loss of ``perturbed_loss``.

  Per query key ``k_j`` (``split(fold_in(direction_key, t), q)``, as the
  generic step): ``f(x + l u_j)`` then ``f(x - l u_j)`` per example, each
  pass perturbing as it goes (DPZero eq. (2)); the two-point scalar, its
  clipping and noise (:func:`release_scalars`); the in-place update
  (:func:`descend`). The passes run over physical chunks of
  ``physical_batch_size`` rows (:mod:`zoprivacy.core.physical_batches`),
  each chunk perturbing as it goes.
  """
  physical_batch_size = physical_batches.check(physical_batch_size)
  validation.one_of("directions", directions, SLICEABLE_DIRECTIONS)
  prng = query.direction_prng
  if prng not in directions_lib.COUNTER_PRNGS:
    raise ValueError(
      "The layer-wise step draws u by a counter hash "
      f"{directions_lib.COUNTER_PRNGS} only, got direction_prng={prng!r}."
    )
  learning_rate = validation.positive_or_traced("learning_rate", learning_rate)
  privacy = query.privacy
  plan = plan_lib.PrivacyPlan.non_private() if privacy is None else privacy.plan
  test_seed = None if privacy is None else privacy.insecure_test_noise_seed
  smoothing, clip_target = query.smoothing, query.clip_target

  def init(params):
    del params
    return base.init_state(direction_key, plan, query.num_queries, test_seed)

  def step(
    trainable, state, batch, frozen=None, mask=None, discrete_noise=None
  ):
    base.check_batch(plan, getattr(batch, "selection", None))
    batch, mask = _unpack_batch(batch, mask)
    keyed, discrete_noise = base.keyed_with_noise(
      state, discrete_noise, inputs=(trainable, batch, frozen, mask)
    )
    dir_key, noise_key = base.step_keys(keyed)
    query_keys = jax.random.split(dir_key, query.num_queries)
    losses = functools.partial(
      _perturbed_losses,
      perturbed_loss,
      trainable,
      frozen,
      batch,
      directions,
      prng,
      physical_batch_size,
    )
    per_example = _per_example_scalars(
      losses, query_keys, query.num_queries, smoothing, clip_target
    )
    scalars = two_point.release_scalars(
      per_example, mask, noise_key, query, discrete_noise
    )
    trainable = descend(
      trainable,
      directions,
      query_keys,
      scalars,
      learning_rate,
      prng,
      rounding_key=rounding.step_key(dir_key),
    )
    released = jnp.asarray(scalars, jnp.float32).reshape([-1])
    return trainable, base.next_state(state, released=released)

  return LayerwiseZO(init, step, plan, query)


def _unpack_batch(batch, mask):
  """``(data, mask)`` of a ``Batch``, or ``(batch, mask)`` as given."""
  if hasattr(batch, "mask") and hasattr(batch, "data"):  # a Batch
    if mask is not None:
      raise ValueError("Pass either a Batch or mask=, not both.")
    batch, mask = batch.data, batch.mask
  return batch, mask


def _perturbed_losses(
  perturbed_loss, trainable, frozen, batch, directions, prng, size, k, scale
):
  """The per-example losses at ``x + scale u(k)``, perturbed as they go,
  over physical chunks of ``size`` rows."""
  return physical_batches.map_rows(
    lambda rows: perturbed_loss(
      trainable, frozen, rows, Perturbation(directions, k, scale, prng)
    ),
    batch,
    size,
  )


def _per_example_scalars(
  losses, query_keys, num_queries, smoothing, clip_target
):
  """The per-example two-point scalars ``[B, q]`` (DPZero eq. (2)): per query
  key, ``f(x + l u)`` then ``f(x - l u)``, clipped on ``clip_target``."""

  def one_query(k):
    f_plus = losses(k, smoothing)
    # The x - l u pass starts after f(x + l u) (data dependence: XLA's
    # CPU compiler drops optimization barriers before scheduling).
    f_minus = losses(directions_lib.key_after(k, f_plus), -smoothing)
    return clipping.two_point_scalar(f_plus, f_minus, smoothing, clip_target)

  if num_queries == 1:
    return one_query(query_keys[0])[:, None]  # [B, 1]
  return jax.lax.map(one_query, query_keys).T  # [B, q]


@registry.entry(
  "layerwise_dpzero",
  privatize=lambda privacy, a: privatization.privatize(privacy),
)
def layerwise_dpzero(
  privacy,
  *,
  perturbed_loss: PerturbedLoss,
  learning_rate: float,
  smoothing: float = 1e-3,
  directions: str = "gaussian",
  clip_target: str = "finite_difference",
  direction_key=0,
  direction_prng: str = directions_lib.AUTO_COUNTER,
  physical_batch_size: int | None = None,
) -> LayerwiseZO:
  """DPZero (Zhang et al. 2024, Alg. 2) plus SGD at learning rate ``a``,
  layer-wise; ``clip_target='raw_difference'`` (and the value's
  ``mechanism='laplace'``) give DP-ZO (Tang et al. 2024, Alg. 1). The
  privacy value (clip 1.0 by default, in ``clip_target``'s units),
  hyperparameters and the secret noise key are as in
  :func:`zoprivacy.estimators.scalar_zo.dpzero` with ``direction_prng`` a
  counter hash (``'counter2'``, what ``'auto'`` draws with on a large
  model, or ``'counter'``); ``directions`` must be sliceable
  (``'gaussian'`` or ``'rademacher'``: a sphere needs the global norm)."""
  return _layerwise(
    directions,
    clip_target,
    privatization.privatize(privacy),
    _direction_args(
      smoothing,
      privacy.num_queries,
      direction_key,
      direction_prng,
      physical_batch_size,
    ),
    perturbed_loss,
    learning_rate,
  )


def layerwise_mezo(
  *,
  perturbed_loss: PerturbedLoss,
  learning_rate: float,
  smoothing: float = 1e-3,
  num_queries: int = 1,
  directions: str = "gaussian",
  direction_key=0,
  direction_prng: str = directions_lib.AUTO_COUNTER,
  physical_batch_size: int | None = None,
) -> LayerwiseZO:
  """MeZO (Malladi et al. 2023) plus SGD, layer-wise; NOT private."""
  return _layerwise(
    directions,
    "finite_difference",
    None,
    _direction_args(
      smoothing, num_queries, direction_key, direction_prng, physical_batch_size
    ),
    perturbed_loss,
    learning_rate,
  )


def _direction_args(
  smoothing, num_queries, direction_key, direction_prng, physical_batch_size
):
  return dict(
    smoothing=smoothing,
    num_queries=num_queries,
    direction_key=direction_key,
    direction_prng=direction_prng,
    physical_batch_size=physical_batch_size,
  )


def _layerwise(directions, clip_target, privacy, h, loss, learning_rate):
  query = two_point.make_query(
    directions=directions,
    direction_prng=h["direction_prng"],
    smoothing=h["smoothing"],
    clip_target=clip_target,
    privacy=privacy,
    num_queries=h["num_queries"],
  )
  return layerwise_two_point(
    query,
    directions=directions,
    perturbed_loss=loss,
    learning_rate=learning_rate,
    direction_key=h["direction_key"],
    physical_batch_size=h["physical_batch_size"],
  )
