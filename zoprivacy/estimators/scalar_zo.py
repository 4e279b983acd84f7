"""Two-point zeroth-order estimators with a privatized *scalar*: MeZO, DPZero, DP-ZO.

All three are the one two-point step of :mod:`zoprivacy.estimators.two_point`
(directions, two loss queries per example, a clipped and noised scalar);
they differ only in the mechanism, the clipped quantity and the defaults.
"""

from __future__ import annotations

from zoprivacy.estimators import base, registry, two_point
from zoprivacy.privacy import privatization


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
  privacy, *, clip_target, default_clip, **direction_args
) -> base.PrivateEstimator:
  """DPZero / DP-ZO: the two-point step with ``privacy``'s mechanism and
  plan; ``direction_args``: ``directions``, ``direction_prng``,
  ``smoothing``, ``direction_key`` and ``physical_batch_size``."""
  direction_key = direction_args.pop("direction_key")
  physical_batch_size = direction_args.pop("physical_batch_size")
  query = two_point.make_query(
    clip_target=clip_target,
    privacy=privatization.privatize(privacy, clip=default_clip),
    **direction_args,
  )
  return two_point.two_point_estimator(
    query,
    direction_key=direction_key,
    physical_batch_size=physical_batch_size,
  )


def scalar_privatization(default_clip: float = 1.0):
  """The ``privatize`` of a factory that privatizes ``q`` per-example
  scalars clipped at the value's clip (``default_clip`` when it has none):
  DPZero, DP-ZO, PAZO-M/P."""
  return lambda privacy, arguments: privatization.privatize(
    privacy, clip=default_clip
  )


@registry.estimator(
  "dpzero", learning_rate=0.02, privatize=scalar_privatization()
)
def dpzero(
  privacy,
  *,
  smoothing: float = 1e-3,
  directions: str = "sphere",
  direction_key=0,
  direction_prng: str = "auto",
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """DPZero (Zhang et al. 2024, Alg. 2): scalar Gaussian noise.

  Line 3: ``x <- x - a ((1/B) sum_i clip_C((f(x+lu) - f(x-lu)) / (2l)) + z) u``
  with ``z ~ N(0, (sigma C / B)^2)``: the value's ``clip`` ``C`` (default
  1.0) bounds the per-example *finite difference*. Directions default to
  Alg. 2's ``sqrt(d) S^{d-1}``; the paper's experiments use
  ``directions='gaussian'`` (its Table 7 finds no difference).

  Privacy, from the value ``privacy`` (:class:`zoprivacy.Privacy`): per
  step, a subsampled Gaussian with its ``noise_multiplier`` at ``p =
  expected_batch_size / dataset_size`` of its sampling, add/remove by
  default (the paper's replace-one with ``neighboring='replace_one'``).
  With ``num_queries = q`` (n-SPSA), each scalar gets noise std ``sqrt(q)
  sigma C`` and the step is still one Gaussian with ``noise_multiplier``
  (Dong et al. 2022, Cor. 3.3; see ``docs/conventions.md``). Its noise:
  exact discrete noise on the scalars quantized on a grid (the default,
  drawn by the update on the host, or given as the extra argument
  ``discrete_noise=``), or the opt-ins ``zoprivacy.SecureMode()`` and
  ``zoprivacy.Float()`` (exposed to floating-point attacks, Mironov 2012;
  the plan says so). A value with a target and no multiplier is
  calibrated on this plan.

  Args:
    privacy: the privacy value.
    smoothing: ``lambda``.
    directions: a name from :data:`zoprivacy.zo.directions.DIRECTION_NAMES`.
    direction_key: PUBLIC PRNG key or integer seed of the directions.
    direction_prng: 'auto' (default; ``docs/directions.md``), 'counter2',
      'counter', 'threefry' (the papers'), 'rbg' or 'unsafe_rbg'.
    physical_batch_size: rows per physical chunk of the forward passes
      (``None``: the whole batch at once); the release is one per batch
      whatever it is (:mod:`zoprivacy.core.physical_batches`).

  Per-example contract (entry ``i`` of the batched loss depends only on
  example ``i``; :mod:`zoprivacy.first_order.per_example_check`): see
  :mod:`zoprivacy.estimators.base`.
  """
  return _private_scalar_estimator(
    privacy,
    clip_target="finite_difference",
    default_clip=1.0,
    directions=directions,
    direction_prng=direction_prng,
    smoothing=smoothing,
    direction_key=direction_key,
    physical_batch_size=physical_batch_size,
  )


# dp_zo clips the raw difference f(x + l u) - f(x - l u) = 2 l * (finite
# difference): its default clip 2e-3 at l = 1e-3 is DPZero's 1.0 on the
# finite difference, so switching estimator by override keeps the scale.
DP_ZO_CLIP = 2e-3


@registry.estimator(
  "dp_zo", learning_rate=0.02, privatize=scalar_privatization(DP_ZO_CLIP)
)
def dp_zo(
  privacy,
  *,
  smoothing: float = 1e-3,
  directions: str = "gaussian",
  clip_target: str = "raw_difference",
  direction_key=0,
  direction_prng: str = "auto",
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """DP-ZO (Tang et al. 2024, Alg. 1/2): Gaussian or Laplace scalar noise.

  Lines 10-17: ``l_i = clip(L(th+phi z) - L(th-phi z), C)``; ``s = (sum_i l_i +
  Z) / (B 2 phi)`` with ``Z = N(0, C^2 sigma^2)`` (line 13) or
  ``Laplace(0, C sigma)`` (line 15, the value's ``mechanism='laplace'``);
  ``th <- th - eta s z``. The value's ``clip`` bounds the *raw* loss
  difference by default (a DP-ZO ``C`` is a DPZero ``C/(2 phi)``; with no
  clip in the value, 2e-3, DPZero's 1.0 at ``phi = 1e-3``);
  ``clip_target='finite_difference'`` switches to DPZero's convention.

  Privacy, from ``privacy``: add/remove, Poisson sampling at ``p = B/n``;
  Gaussian: PLD of the subsampled Gaussian; Laplace: ``eps = T log(1 + p
  (e^{1/sigma} - 1))`` pure (Thm 3.1) and a tighter PLD ``(eps, delta)``,
  see :mod:`zoprivacy.accounting`. The noise and calibration are as in
  :func:`dpzero`.

  Args:
    privacy: the privacy value (``num_queries``: ``q``, the paper's 1).
    smoothing: perturbation scale ``phi``.
    directions: 'gaussian' (the paper's) or another sampler name.
    clip_target: 'raw_difference' (the paper's) or 'finite_difference'.

  ``direction_key``, ``direction_prng`` and ``physical_batch_size`` are
  as in :func:`dpzero`. The loss must satisfy the per-example contract
  (:mod:`zoprivacy.first_order.per_example_check`).
  """
  return _private_scalar_estimator(
    privacy,
    clip_target=clip_target,
    default_clip=DP_ZO_CLIP,
    directions=directions,
    direction_prng=direction_prng,
    smoothing=smoothing,
    direction_key=direction_key,
    physical_batch_size=physical_batch_size,
  )
