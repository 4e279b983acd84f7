"""Two-point zeroth-order estimators with a privatized *scalar*: MeZO, DPZero, DP-ZO.

All three are the one two-point step of :mod:`zoprivacy.estimators.two_point`
(directions, two loss queries per example, a clipped and noised scalar);
they differ only in the mechanism, the clipped quantity and the defaults.
"""

from __future__ import annotations

from zoprivacy.estimators import base, registry, two_point
from zoprivacy.estimators.privacy_args import (
  PrivacyArgs,
  scalar_privatization,
)


@registry.estimator("mezo", learning_rate=1e-3)
def mezo(
  *,
  smoothing: float = 1e-3,
  num_queries: int = 1,
  directions: str = "gaussian",
  direction_key=0,
  direction_prng: str = "auto",
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """MeZO (Malladi et al. 2023): non-private two-point SPSA, the baseline.

  Returns ``(1/q) sum_j (L(x+l u_j; B) - L(x-l u_j; B)) / (2l) u_j`` with the
  mean loss over the real examples of the batch (n-SPSA, DP-ZO App. C Def. 2).
  Not private: ``privacy`` is ``None``.

  Args:
    smoothing: perturbation scale ``l`` (MeZO's ``epsilon``).
    num_queries: directions per step ``q``.
    directions: a name from :data:`zoprivacy.zo.directions.DIRECTION_NAMES`.
    direction_key: public PRNG key or integer seed of the directions.
    direction_prng: 'auto' (default: threefry below 2^16 parameters, the
      counter hash from there on, see :func:`zoprivacy.zo.directions.generator`
      and :func:`~zoprivacy.zo.directions.perturbs_leafwise`), 'counter',
      'threefry', 'rbg' or 'unsafe_rbg' (directions).

  Per-example contract, secret noise keys and ``physical_batch_size``: see
  :mod:`zoprivacy.estimators.base`.
  """
  query = two_point.make_query(
    directions=directions,
    direction_prng=direction_prng,
    smoothing=smoothing,
    clip_target="finite_difference",
    privacy=None,
    num_queries=num_queries,
  )
  return two_point.two_point_estimator(
    query,
    direction_key=direction_key,
    physical_batch_size=physical_batch_size,
  )


def _private_scalar_estimator(
  privacy: PrivacyArgs, *, clip_target, **direction_args
) -> base.PrivateEstimator:
  """DPZero / DP-ZO: the two-point step with ``privacy``'s mechanism and
  plan; ``direction_args``: ``directions``, ``direction_prng``,
  ``smoothing``, ``direction_key`` and ``physical_batch_size``."""
  direction_key = direction_args.pop("direction_key")
  physical_batch_size = direction_args.pop("physical_batch_size")
  query = two_point.make_query(
    clip_target=clip_target,
    privacy=privacy.privatization(),
    **direction_args,
  )
  return two_point.two_point_estimator(
    query,
    direction_key=direction_key,
    physical_batch_size=physical_batch_size,
  )


@registry.estimator(
  "dpzero", learning_rate=0.02, privatize=scalar_privatization
)
def dpzero(
  *,
  noise_multiplier: float,
  expected_batch_size: float,
  clip: float = 1.0,
  smoothing: float = 1e-3,
  dataset_size: int | None = None,
  num_queries: int = 1,
  directions: str = "sphere",
  neighboring: str = "add_or_remove",
  direction_key=0,
  direction_prng: str = "auto",
  noise: str = "exact",
  grid_points: int = 1024,
  exact_noise: bool | None = None,
  insecure_test_noise_seed: int | None = None,
  physical_batch_size: int | None = None,
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
    directions: a name from :data:`zoprivacy.zo.directions.DIRECTION_NAMES`.
    neighboring: 'add_or_remove' (default) or 'replace_one'.
    direction_key: PUBLIC PRNG key or integer seed of the directions.
    direction_prng: 'auto' (default; ``docs/directions.md``), 'counter2',
      'counter', 'threefry' (the papers'), 'rbg' or 'unsafe_rbg'.
    noise: 'exact' (the default): exact discrete noise on the sum of the
      scalars quantized on a grid of ``grid_points`` steps per clip; the
      update draws it on the host by itself (or takes the extra argument
      ``discrete_noise=``, e.g. from
      :meth:`zoprivacy.privacy.ExactNoiseSource.for_state`).
      'float': floating-point noise, an explicit opt-in exposed to
      floating-point attacks (Mironov 2012), which the plan says;
      'secure_mode': floating-point Gaussian with Opacus' defence.
    grid_points: integer sensitivity of the quantized release.
    exact_noise: deprecated; ``False`` means ``noise='float'``.
    insecure_test_noise_seed: REPRODUCIBLE noise for tests and debugging;
      the run is then NOT private and its plan says so. By default the noise
      key comes from OS entropy at ``init``.
    physical_batch_size: rows per physical chunk of the forward passes
      (``None``: the whole batch at once); the release is one per batch
      whatever it is (:mod:`zoprivacy.core.physical_batches`).

  Per-example contract (entry ``i`` of the batched loss depends only on
  example ``i``; :mod:`zoprivacy.first_order.per_example_check`): see
  :mod:`zoprivacy.estimators.base`.
  """
  return _private_scalar_estimator(
    PrivacyArgs(
      clip=clip,
      noise_multiplier=noise_multiplier,
      expected_batch_size=expected_batch_size,
      dataset_size=dataset_size,
      num_queries=num_queries,
      neighboring=neighboring,
      noise=noise,
      exact_noise=exact_noise,
      grid_points=grid_points,
      insecure_test_noise_seed=insecure_test_noise_seed,
    ),
    clip_target="finite_difference",
    directions=directions,
    direction_prng=direction_prng,
    smoothing=smoothing,
    direction_key=direction_key,
    physical_batch_size=physical_batch_size,
  )


# dp_zo clips the raw difference f(x + l u) - f(x - l u) = 2 l * (finite
# difference): its default clip 2e-3 at l = 1e-3 is DPZero's 1.0 on the
# finite difference, so switching estimator by override keeps the scale.
@registry.estimator("dp_zo", learning_rate=0.02, privatize=scalar_privatization)
def dp_zo(
  *,
  noise_multiplier: float,
  expected_batch_size: float,
  clip: float = 2e-3,
  smoothing: float = 1e-3,
  mechanism: str = "gaussian",
  directions: str = "gaussian",
  clip_target: str = "raw_difference",
  dataset_size: int | None = None,
  num_queries: int = 1,
  direction_key=0,
  direction_prng: str = "auto",
  noise: str = "exact",
  grid_points: int = 1024,
  exact_noise: bool | None = None,
  insecure_test_noise_seed: int | None = None,
  physical_batch_size: int | None = None,
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

  ``direction_key``, ``direction_prng``, ``noise``, ``grid_points``,
  ``insecure_test_noise_seed`` and ``physical_batch_size`` are as in
  :func:`dpzero`. The loss must satisfy
  the per-example contract (:mod:`zoprivacy.first_order.per_example_check`).
  """
  return _private_scalar_estimator(
    PrivacyArgs(
      clip=clip,
      noise_multiplier=noise_multiplier,
      expected_batch_size=expected_batch_size,
      dataset_size=dataset_size,
      num_queries=num_queries,
      mechanism=mechanism,
      noise=noise,
      exact_noise=exact_noise,
      grid_points=grid_points,
      insecure_test_noise_seed=insecure_test_noise_seed,
    ),
    clip_target=clip_target,
    directions=directions,
    direction_prng=direction_prng,
    smoothing=smoothing,
    direction_key=direction_key,
    physical_batch_size=physical_batch_size,
  )
