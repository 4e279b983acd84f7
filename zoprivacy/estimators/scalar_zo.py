"""Two-point zeroth-order estimators with a privatized *scalar*: MeZO, DPZero, DP-ZO.

All three are one composition of the shared primitives:

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
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoprivacy import clipping, mechanisms, queries, validation
from zoprivacy import directions as directions_lib
from zoprivacy.estimators import base, registry


def two_point_scalars(
  *,
  loss,
  params,
  batch,
  mask,
  direction,
  query_keys,
  noise_key,
  smoothing: float,
  clip_target: str,
  mechanism: mechanisms.Mechanism,
  privacy: base.Privatization | None,
  discrete_noise=None,
) -> jax.Array:
  """Steps 2-4: the ``q`` released directional-derivative estimates ``s_j``.

  For each query key ``k_j``, ``u_j = direction(k_j)``; per example the
  two-point scalar (DPZero eq. (2) / DP-ZO Alg. 1 line 10) at ``x +- l u_j``
  (two batched forward passes). Private (``privacy`` given): clipped at
  ``mechanism.clip`` per example, summed over real examples, noised once
  (DPZero Alg. 2 line 3, DP-ZO Alg. 1 lines 13/15), divided by the expected
  batch size. Non-private: the mean over real examples (MeZO). With a
  :class:`~zoprivacy.mechanisms.DiscreteMechanism`, ``discrete_noise`` holds
  the step's host-drawn integer noise.
  """
  num_queries = query_keys.shape[0]

  def query(k):
    u = direction(k)
    f_plus, f_minus = queries.two_point_losses(
      loss, params, u, smoothing, batch
    )
    return clipping.two_point_scalar(f_plus, f_minus, smoothing, clip_target)

  if num_queries == 1:
    per_example = query(query_keys[0])[:, None]  # [B, 1]
  else:
    per_example = jax.lax.map(query, query_keys).T  # [B, q]
  per_example = per_example.astype(jnp.float32)

  if privacy is not None:
    clipped = clipping.clip_scalars(per_example, mechanism.clip)
    noisy_sum = mechanism.privatize_sum(
      noise_key, clipped, mask, discrete_noise
    )
    mean = noisy_sum / privacy.expected_batch_size
  else:
    if mask is None:
      count = per_example.shape[0]
    else:
      count = jnp.maximum(jnp.sum(mask.astype(jnp.float32)), 1.0)
    mean = mechanisms.masked_sum(per_example, mask) / count
  return clipping.to_directional_derivative(mean, smoothing, clip_target)


def average_of_directions(direction, query_keys, scalars, params):
  """Step 5: ``(1/q) sum_j s_j u_j``, regenerating each ``u_j`` from its key.

  With ``q = 1`` this is one fused ``s u``; otherwise a ``lax.scan`` keeps
  one direction in memory at a time.
  """
  num_queries = query_keys.shape[0]
  if num_queries == 1:
    return jax.tree.map(
      lambda u: scalars[0].astype(u.dtype) * u, direction(query_keys[0])
    )

  def accumulate(acc, key_and_scalar):
    k, s = key_and_scalar
    u = direction(k)
    return jax.tree.map(
      lambda a, x: a + (s / num_queries).astype(x.dtype) * x, acc, u
    ), None

  zeros = jax.tree.map(jnp.zeros_like, params)
  out, _ = jax.lax.scan(accumulate, zeros, (query_keys, scalars))
  return out


def _two_point_transformation(
  *,
  smoothing: float,
  num_queries: int,
  directions: str,
  clip_target: str,
  mechanism: mechanisms.Mechanism,
  privacy: base.Privatization | None,
  direction_key,
  insecure_test_noise_seed,
  direction_prng: str,
) -> base.PrivateEstimator:
  """Steps 1-5 above as an optax transformation."""
  sampler = directions_lib.get_sampler(directions)

  def compute(params, args, direction_key, noise_key):
    query_keys = jax.random.split(direction_key, num_queries)

    def direction(k):
      return sampler(directions_lib.direction_key(k, direction_prng), params)

    scalars = two_point_scalars(
      loss=args.loss,
      params=params,
      batch=args.batch,
      mask=args.mask,
      direction=direction,
      query_keys=query_keys,
      noise_key=noise_key,
      smoothing=smoothing,
      clip_target=clip_target,
      mechanism=mechanism,
      privacy=privacy,
      discrete_noise=args.discrete_noise,
    )
    return average_of_directions(
      direction, query_keys, scalars, params
    ), scalars

  return base.build_estimator(
    compute,
    direction_key=direction_key,
    privacy=privacy,
    num_released=num_queries,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )


def mezo(
  *,
  smoothing: float = 1e-3,
  num_queries: int = 1,
  directions: str = "gaussian",
  direction_key=0,
  direction_prng: str = "threefry",
) -> base.PrivateEstimator:
  """MeZO (Malladi et al. 2023): non-private two-point SPSA, the baseline.

  Returns ``(1/q) sum_j (L(x+l u_j; B) - L(x-l u_j; B)) / (2l) u_j`` with the
  mean loss over the real examples of the batch (n-SPSA, DP-ZO App. C Def. 2).
  Not private: ``privacy`` is ``None``.

  Args:
    smoothing: perturbation scale ``l`` (MeZO's ``epsilon``).
    num_queries: directions per step ``q``.
    directions: a name from :data:`zoprivacy.directions.DIRECTION_NAMES`.
    direction_key: public PRNG key or integer seed of the directions.
    direction_prng: 'threefry', 'rbg' or 'unsafe_rbg' for the directions.

  The loss must be per-example: entry ``i`` of ``batched_loss(params,
  batch)`` may depend only on ``params`` and example ``i`` (padding rows
  included), or the sensitivity bound fails; check it with
  :func:`zoprivacy.per_example_check.assert_per_example`.
  """
  smoothing = validation.positive_or_traced("smoothing", smoothing)
  num_queries = validation.positive_int("num_queries", num_queries)
  validation.one_of("directions", directions, directions_lib.DIRECTION_NAMES)
  validation.one_of("direction_prng", direction_prng, directions_lib.PRNG_IMPLS)
  return _two_point_transformation(
    smoothing=smoothing,
    num_queries=num_queries,
    directions=directions,
    clip_target="finite_difference",
    mechanism=mechanisms.NoNoise(),
    privacy=None,
    direction_key=direction_key,
    insecure_test_noise_seed=None,
    direction_prng=direction_prng,
  )


def _private_scalar_estimator(
  *,
  mechanism_name,
  clip,
  noise_multiplier,
  smoothing,
  expected_batch_size,
  dataset_size,
  num_queries,
  directions,
  clip_target,
  neighboring,
  direction_key,
  direction_prng,
  exact_noise,
  grid_points,
  insecure_test_noise_seed,
):
  smoothing = validation.positive_or_traced("smoothing", smoothing)
  validation.one_of("directions", directions, directions_lib.DIRECTION_NAMES)
  validation.one_of("clip_target", clip_target, clipping.CLIP_TARGETS)
  validation.one_of("direction_prng", direction_prng, directions_lib.PRNG_IMPLS)
  privacy = base.privacy_spec(
    clip=clip,
    noise_multiplier=noise_multiplier,
    expected_batch_size=expected_batch_size,
    dataset_size=dataset_size,
    num_queries=num_queries,
    neighboring=neighboring,
    mechanism=mechanism_name,
    exact_noise=exact_noise,
    grid_points=grid_points,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )
  return _two_point_transformation(
    smoothing=smoothing,
    num_queries=privacy.mechanism.num_queries,
    directions=directions,
    clip_target=clip_target,
    mechanism=privacy.mechanism,
    privacy=privacy,
    direction_key=direction_key,
    insecure_test_noise_seed=insecure_test_noise_seed,
    direction_prng=direction_prng,
  )


def dpzero(
  *,
  clip: float,
  noise_multiplier: float,
  smoothing: float,
  expected_batch_size: float,
  dataset_size: int | None = None,
  num_queries: int = 1,
  directions: str = "sphere",
  neighboring: str = "add_or_remove",
  direction_key=0,
  direction_prng: str = "threefry",
  exact_noise: bool = False,
  grid_points: int = 1024,
  insecure_test_noise_seed: int | None = None,
) -> base.PrivateEstimator:
  """DPZero (Zhang et al. 2024, Alg. 2): scalar Gaussian noise.

  Line 3: ``x <- x - a ((1/B) sum_i clip_C((f(x+lu) - f(x-lu)) / (2l)) + z) u``
  with ``z ~ N(0, (sigma C / B)^2)``: ``clip`` bounds the *finite difference*.
  Directions default to Alg. 2's ``sqrt(d) S^{d-1}``; the paper's experiments
  use ``directions='gaussian'`` (its Table 7 finds no difference).

  Privacy: per step, a Poisson-subsampled Gaussian with ``noise_multiplier``
  at ``p = expected_batch_size / dataset_size``, add/remove by default (the
  paper's replace-one with ``neighboring='replace_one'``). With ``num_queries
  = q``, each scalar gets noise std ``sqrt(q) sigma C`` and the step is still
  one Gaussian with ``noise_multiplier`` (Dong et al. 2022, Cor. 3.3; see
  ``docs/conventions.md``).

  Args:
    clip: threshold ``C`` on the per-example finite difference.
    noise_multiplier: ``sigma``, noise std over the per-example bound.
    smoothing: ``lambda``.
    expected_batch_size: ``B = p n``; the noisy sum is divided by it.
    dataset_size: ``n``, to validate ``B`` and to account without repeating it.
    num_queries: ``q`` directions per step (n-SPSA).
    directions: a name from :data:`zoprivacy.directions.DIRECTION_NAMES`.
    neighboring: 'add_or_remove' (default) or 'replace_one'.
    direction_key: PUBLIC PRNG key or integer seed of the directions.
    direction_prng: 'threefry' (default), 'rbg' or 'unsafe_rbg'.
    exact_noise: add exact discrete noise to a sum quantized on a grid of
      ``grid_points`` steps per clip (one query, add/remove only; otherwise
      floating-point noise and the plan notes why). Each update then needs
      the extra argument ``discrete_noise=`` drawn by
      :class:`zoprivacy.privacy.ExactNoiseSource`.
    grid_points: integer sensitivity of the quantized release.
    insecure_test_noise_seed: REPRODUCIBLE noise for tests and debugging;
      the run is then NOT private and its plan says so. By default the noise
      key comes from OS entropy at ``init``.

  The loss must satisfy the per-example contract: entry ``i`` of
  ``batched_loss(params, batch)`` depends only on ``params`` and example
  ``i`` (see :mod:`zoprivacy.per_example_check`).
  """
  return _private_scalar_estimator(
    mechanism_name="gaussian",
    clip=clip,
    noise_multiplier=noise_multiplier,
    smoothing=smoothing,
    expected_batch_size=expected_batch_size,
    dataset_size=dataset_size,
    num_queries=num_queries,
    directions=directions,
    clip_target="finite_difference",
    neighboring=neighboring,
    direction_key=direction_key,
    direction_prng=direction_prng,
    exact_noise=exact_noise,
    grid_points=grid_points,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )


def dp_zo(
  *,
  clip: float,
  noise_multiplier: float,
  smoothing: float,
  expected_batch_size: float,
  dataset_size: int | None = None,
  mechanism: str = "gaussian",
  num_queries: int = 1,
  directions: str = "gaussian",
  clip_target: str = "raw_difference",
  direction_key=0,
  direction_prng: str = "threefry",
  exact_noise: bool = False,
  grid_points: int = 1024,
  insecure_test_noise_seed: int | None = None,
) -> base.PrivateEstimator:
  """DP-ZO (Tang et al. 2024, Alg. 1/2): Gaussian or Laplace scalar noise.

  Lines 10-17: ``l_i = clip(L(th+phi z) - L(th-phi z), C)``; ``s = (sum_i l_i +
  Z) / (B 2 phi)`` with ``Z = N(0, C^2 sigma^2)`` (line 13) or
  ``Laplace(0, C sigma)`` (line 15); ``th <- th - eta s z``. ``clip`` bounds
  the *raw* loss difference by default (a DP-ZO ``C`` is a DPZero ``C/(2 phi)``);
  ``clip_target='finite_difference'`` switches to DPZero's convention.

  Privacy: add/remove, Poisson sampling at ``p = B/n``; Gaussian: PLD of the
  subsampled Gaussian; Laplace: ``eps = T log(1 + p (e^{1/sigma} - 1))`` pure
  (Thm 3.1) and a tighter PLD ``(eps, delta)``, see :mod:`zoprivacy.accounting`.

  Args:
    clip: threshold ``C``; see ``clip_target``.
    noise_multiplier: ``sigma``.
    smoothing: perturbation scale ``phi``.
    expected_batch_size: ``B``; the noisy sum is divided by it (not by the
      realized batch size).
    dataset_size: ``|D|``.
    mechanism: 'gaussian' or 'laplace'.
    num_queries: ``q`` (the paper uses 1; App. C).
    directions: 'gaussian' (the paper's) or another sampler name.
    clip_target: 'raw_difference' (the paper's) or 'finite_difference'.

  ``direction_key``, ``direction_prng``, ``exact_noise``, ``grid_points`` and
  ``insecure_test_noise_seed`` are as in :func:`dpzero`. The loss must satisfy
  the per-example contract (:mod:`zoprivacy.per_example_check`).
  """
  return _private_scalar_estimator(
    mechanism_name=mechanism,
    clip=clip,
    noise_multiplier=noise_multiplier,
    smoothing=smoothing,
    expected_batch_size=expected_batch_size,
    dataset_size=dataset_size,
    num_queries=num_queries,
    directions=directions,
    clip_target=clip_target,
    neighboring="add_or_remove",
    direction_key=direction_key,
    direction_prng=direction_prng,
    exact_noise=exact_noise,
    grid_points=grid_points,
    insecure_test_noise_seed=insecure_test_noise_seed,
  )


registry.register(
  registry.EstimatorSpec(
    "mezo",
    mezo,
    private=False,
    defaults=(("smoothing", 1e-3), ("directions", "gaussian")),
  )
)
registry.register(
  registry.EstimatorSpec(
    "dpzero",
    dpzero,
    exact_noise=True,
    defaults=(("clip", 1.0), ("smoothing", 1e-3)),
  )
)
registry.register(
  registry.EstimatorSpec(
    "dp_zo",
    dp_zo,
    exact_noise=True,
    defaults=(("clip", 1.0), ("smoothing", 1e-3)),
  )
)
