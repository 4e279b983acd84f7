"""Noisy-ZOGD (Chien, Chen & Li, eq. (3)) and its mini-batch form (eq. (63)).

One step, composed from the shared primitives:

1. ``K`` orthonormal directions, Haar-uniform on the Stiefel manifold
   (:func:`zoprivacy.zo.directions.stiefel`), from the step's public key;
2. per example and direction, the two-point finite difference at
   ``w +- xi u_k`` (:mod:`zoprivacy.zo.queries`), clipped at ``Delta``
   (:mod:`zoprivacy.mechanisms.clipping`) and summed over the batch;
3. directional noise on the ``K`` sums and isotropic noise on the
   ``d``-vector (two :class:`zoprivacy.mechanisms.noise.GaussianMechanism`);
4. ``g = (1/K) sum_k (g_k + sqrt(K) G_k) u_k + G' / sqrt(d)`` with
   ``G_k ~ N(0, beta sigma^2)``, ``G' ~ N(0, (1 - beta) sigma^2 I_d)``.

``optax.sgd(eta)`` then takes ``w - eta g``, which is eq. (3) before the
projection, and :func:`zoprivacy.zo.projection.project_l2_ball` projects onto
``B_R``: :func:`noisy_zogd_chain` builds exactly that chain. ``beta`` is the
setting's ``directional_fraction`` (Thm 3.2's convention, the directional
share; see :mod:`zoprivacy.hidden_state.setting`).

In units of the clipped sums (one example contributes a vector of L2 norm
at most ``sqrt(K) Delta``, sensitivity ``2 sqrt(K) Delta`` under
replace-one), the directional noise has multiplier ``b sqrt(beta) sigma /
Delta`` and the isotropic one ``b sqrt(K (1 - beta) / d) sigma / Delta``,
with ``b`` the batch size (``n`` for the full batch).

Floating-point defence: the hidden-state accountant assumes continuous
Gaussians, so the noise stays float32 (``secure_mode``, the plan says so),
but the step's ``g`` is then snapped to the lattice ``s Z`` (``s`` a power
of two near ``sigma / (256 sqrt(d))``, larger only where ``Delta`` plus 64
``sigma`` would not fit ``2**30`` steps) and gets exact discrete Gaussian
noise of sigma one step (:func:`zoprivacy.secret_noise.vector_discrete_mechanism.
snap_to_lattice`): every output is possible in both neighbouring worlds,
so a floating-point precision test reaches no certain decision. The extra
error, at most ``s / 2`` rounding plus noise of std ``s`` per coordinate,
is about ``1/256`` of the isotropic noise's and is not accounted (it only
adds noise).

Randomness (``docs/conventions.md`` §9): the directions come from the
PUBLIC ``direction_key`` (step ``t``: ``fold_in(direction_key, t)``); both
noises come from the state's SECRET noise key (OS entropy, in the process),
drawn in float32. Nothing the step computes is released: the intermediate
iterates are the hidden state of the analysis, so the estimator state keeps
no released scalars (unlike DPZero's public scalar trajectory).

The state carries the composition plan
(:func:`zoprivacy.hidden_state.privacy.composition_plan`), so
``zoprivacy.find_plan(state)`` finds it. The registry's ``'noisy_zogd'``
(``ESTIMATORS['noisy_zogd']``) is :func:`noisy_zogd_chain`, the whole update
with its step size and projection (both assumed by the final-iterate
analysis, so a runner adds no optimizer); :func:`noisy_zogd` is the bare
privatized gradient for use in a chain of one's own.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import optax

from zoprivacy.core import physical_batches, validation
from zoprivacy.estimators import base, registry
from zoprivacy.hidden_state import privacy as privacy_lib
from zoprivacy.hidden_state import setting as setting_lib
from zoprivacy.mechanisms import clipping
from zoprivacy.mechanisms import noise as mechanisms
from zoprivacy.secret_noise import vector_discrete_mechanism as vector_exact
from zoprivacy.zo import directions as directions_lib
from zoprivacy.zo import projection, queries

_SNAP_STREAM = 0x534E4150  # the snapping noise's key: fold_in(noise_key, .)


def _mechanisms(setting: setting_lib.NoisyZOGDSetting, beta):
  """The directional and isotropic Gaussian mechanisms of one step."""
  b, k, d = setting.divisor, setting.num_directions, setting.dimension
  scale = b * setting.noise_std / setting.clip
  directional = mechanisms.GaussianMechanism(
    clip=setting.clip,
    noise_multiplier=scale * jnp.sqrt(beta),
    num_queries=k,
    neighboring="replace_one",
    float_defence="secure_mode",
  )
  isotropic = mechanisms.GaussianMechanism(
    clip=setting.clip,
    noise_multiplier=scale * jnp.sqrt(k * (1.0 - beta) / d),
    num_queries=k,
    neighboring="replace_one",
    float_defence="secure_mode",
  )
  return directional, isotropic


def noisy_zogd(
  setting: setting_lib.NoisyZOGDSetting,
  *,
  direction_key=0,
  insecure_test_noise_seed: int | None = None,
  direction_prng: str = "threefry",
  query_batch_size: int | None = None,
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """The privatized Noisy-ZOGD gradient ``g`` of eq. (3) (before ``-eta``).

  Args:
    setting: the run's :class:`~zoprivacy.hidden_state.NoisyZOGDSetting`
      (``K``, ``sigma``, ``Delta``, ``xi > 0``, ``directional_fraction``,
      ``n`` or ``b``), built from the run's privacy value by
      :func:`zoprivacy.hidden_state.setting_of_privacy`. A per-step schedule of fractions is indexed by the
      step count (its last entry is reused past its end).
    direction_key: PUBLIC PRNG key or integer seed of the directions.
    insecure_test_noise_seed: REPRODUCIBLE noise for tests (warns; the plan
      says the run is not private). ``None``: secret noise from OS entropy.
    direction_prng: 'threefry' (default), 'counter' (fast, see
      :mod:`zoprivacy.zo.counter_hash`), 'rbg' or 'unsafe_rbg'.
    query_batch_size: directions evaluated together (``lax.map`` batch);
      ``None``: all ``K`` at once.
    physical_batch_size: examples evaluated together (physical chunks of
      the batch, :mod:`zoprivacy.core.physical_batches`); ``None``: all.

  Returns:
    An estimator whose state holds the composition plan built from the same
    ``setting`` (:func:`zoprivacy.hidden_state.privacy.composition_plan`).

  Raises:
    ValueError: at construction for a non-positive smoothing, at ``init``
      when the parameters do not have ``setting.dimension`` entries.
  """
  smoothing = validation.positive("smoothing", setting.smoothing)
  validation.one_of("direction_prng", direction_prng, directions_lib.PRNG_IMPLS)
  chunk = setting.num_directions
  if query_batch_size is not None:
    chunk = validation.positive_int("query_batch_size", query_batch_size)
  physical_batch_size = physical_batches.check(physical_batch_size)
  sampler = directions_lib.get_sampler(
    "stiefel", num_directions=setting.num_directions, prng=direction_prng
  )
  fraction_at = _fraction_at(setting.directional_fraction)
  plan = privacy_lib.composition_plan(
    setting, insecure_test_noise_seed=insecure_test_noise_seed
  )
  # |g_j| <= ||g|| <= clip before the noise (each clipped sum over b K).
  snap = vector_exact.snap_step(
    setting.noise_std, setting.dimension, setting.clip
  )

  def init_fn(params):
    _check_dimension(params, setting)
    return base.init_state(
      direction_key,
      plan,
      num_released=0,
      insecure_test_noise_seed=insecure_test_noise_seed,
    )

  def update_fn(updates, state, params=None, **extra_args):
    del updates
    if params is None:
      raise ValueError("Estimators need params in update().")
    base.reject_masked_params(params)
    args = base.parse_extra_args(extra_args, physical_batch_size)
    base.guard_release(state, args)  # at trace time: both are static
    inputs = (params, extra_args)
    dir_key, noise_key = base.step_keys(state, inputs)  # public, secret
    u = sampler(dir_key, params)  # leading axis K
    beta = fraction_at(state.step)
    grad = _privatized_gradient(
      setting, params, args, u, beta, noise_key, smoothing, chunk, snap
    )
    return grad, base.next_state(state)

  return base.PrivateEstimator(init_fn, update_fn, plan)


def _fraction_at(fraction):
  """``step -> beta``: the directional fraction, or its schedule's entry at
  the step (the last entry reused past the end)."""
  if not isinstance(fraction, tuple):
    return lambda step: fraction
  schedule = jnp.asarray(fraction, jnp.float32)
  return lambda step: jnp.take(schedule, step, mode="clip")


def _check_dimension(params, setting) -> None:
  dim = directions_lib.tree_size(params)
  if dim != setting.dimension:
    raise ValueError(
      f"The parameters have {dim} entries but the setting says d = "
      f"{setting.dimension}; K = {setting.num_directions} must satisfy "
      "d >= 2K."
    )


def _privatized_gradient(
  setting, params, args, u, beta, noise_key, smoothing, chunk, snap
):
  """Eq. (3)'s ``g`` for the directions ``u`` (leading axis ``K``): the
  clipped per-example finite differences summed with directional noise,
  mapped back through ``u`` with isotropic noise, over ``b K``, then
  snapped to a fine lattice plus exact integer noise (module docstring)."""
  k = setting.num_directions

  def query(u_k):
    f_plus, f_minus = queries.two_point_losses(
      args.loss, params, u_k, smoothing, args.batch
    )
    return clipping.two_point_scalar(
      f_plus, f_minus, smoothing, "finite_difference"
    )

  per_example = jax.lax.map(query, u, batch_size=chunk)  # [K, B]
  clipped = clipping.clip_scalars(
    per_example.astype(jnp.float32).T, setting.clip
  )  # [B, K]
  sums = mechanisms.masked_sum(clipped, args.mask)  # [K]
  directional, isotropic = _mechanisms(setting, beta)
  dir_noise_key, iso_noise_key = jax.random.split(noise_key)
  noisy = directional.add_noise(dir_noise_key, sums)  # float32 noise
  vector = jax.tree.map(
    lambda x: jnp.tensordot(noisy.astype(x.dtype), x, axes=1), u
  )
  vector = isotropic.add_noise(iso_noise_key, vector)  # float32 noise
  grad = jax.tree.map(lambda x: x / (setting.divisor * k), vector)
  return vector_exact.snap_to_lattice(
    jax.random.fold_in(noise_key, _SNAP_STREAM), grad, snap
  )


# The registry's "noisy_zogd" is this chain, not the bare estimator: eq. (3)'s
# step size and projection are part of what the final-iterate (hidden-state)
# analysis assumes, so a runner must not add an optimizer of its own.
@registry.estimator(
  "noisy_zogd",
  sampling=("full_batch", "without_replacement"),
  setting_defaults=(
    ("num_directions", 20),
    ("smoothing", 1e-4),
    ("directional_fraction", 0.5),
  ),
  run_settings=(
    ("dataset", "digits_logreg"),
    ("model", "linear"),
    ("l2", 0.5),
    ("radius", 0.5),
    ("privacy.sampling", "full_batch"),
    ("privacy.noise", "secure_mode"),
    ("privacy.neighboring", "replace_one"),
  ),
  config_fields=("l2", "radius", "hidden_state"),
)
def noisy_zogd_chain(
  setting: setting_lib.NoisyZOGDSetting,
  *,
  noise_multiplier: float | None = None,
  direction_key=0,
  insecure_test_noise_seed: int | None = None,
  direction_prng: str = "threefry",
  query_batch_size: int | None = None,
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """The whole eq. (3) update: estimator, ``sgd(eta)``, projection on ``B_R``.

  ``params`` must start inside ``B_R`` and must not depend on the data
  (Thm 3.2 assumes identical initializations ``w_0 = w_0'``).

  ``setting``: from the run's privacy value,
  :func:`zoprivacy.hidden_state.setting_of_privacy` (its clip, batch,
  dataset size and noise). ``noise_multiplier`` is deprecated (a second
  place for the noise): put it in the value (``Privacy(noise_multiplier=
  ...)``). The other arguments are :func:`noisy_zogd`'s. Registered as
  ``"noisy_zogd"``.
  """
  if noise_multiplier is not None:
    warnings.warn(
      "noisy_zogd_chain(setting, noise_multiplier=...) is deprecated: build "
      "the setting from the run's privacy value, zoprivacy.hidden_state."
      "setting_of_privacy(zoprivacy.Privacy(noise_multiplier=..., ...), "
      "...), which holds the noise once.",
      DeprecationWarning,
      stacklevel=3,
    )
    setting = privacy_lib.with_plan_multiplier(setting, noise_multiplier)
  estimator = noisy_zogd(
    setting,
    direction_key=direction_key,
    insecure_test_noise_seed=insecure_test_noise_seed,
    direction_prng=direction_prng,
    query_batch_size=query_batch_size,
    physical_batch_size=physical_batch_size,
  )
  chain = optax.chain(
    estimator,
    optax.sgd(setting.step_size),
    projection.project_l2_ball(setting.radius),
  )
  return base.PrivateEstimator(chain.init, chain.update, estimator.privacy_plan)
