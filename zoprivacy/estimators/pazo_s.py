"""PAZO-S: zeroth order with public data, selecting among public candidates.

Gong & Li (PAZO) Alg. 3: ``k`` public gradients (and, optionally, the
current point) are candidate steps; the private batch's loss at each
candidate is clipped and noised, and the best noisy candidate is taken
(``g_{j*}``, line 15; an ``sgd(eta)`` follows in the chain). The ``k(+1)``
clipped losses on one Poisson batch are one mechanism per step, as for
PAZO-M/P: one discrete Gaussian with ``k(+1)`` queries under exact noise
(the default), ``PoissonSampled(p, Gaussian(sigma))`` under float noise.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from zoprivacy.core import validation
from zoprivacy.estimators import base, public_data, registry
from zoprivacy.mechanisms import clipping
from zoprivacy.privacy import privatization as privatization_lib
from zoprivacy.zo import directions as directions_lib
from zoprivacy.zo import queries

# ------------------------------------------------------------------- PAZO-S


def privatization(privacy, arguments) -> base.Privatization:
  """PAZO-S's mechanism and plan from its privacy value and (bound)
  ``arguments``: the ``k`` scores, plus the current iterate's with
  ``extra_candidate``, are ``k(+1)`` queries of one Gaussian with the
  value's ``noise_multiplier`` (the value's ``num_queries`` is 1, or
  ``k(+1)`` itself)."""
  k = validation.positive_int(
    "num_public_batches", arguments["num_public_batches"]
  )
  num_scores = k + 1 if arguments["extra_candidate"] else k
  if privacy.num_queries not in (1, num_scores):
    raise ValueError(
      f"pazo_s scores {num_scores} candidates per step, the queries of its "
      f"one mechanism; the privacy value's num_queries="
      f"{privacy.num_queries} is neither 1 (the default) nor {num_scores}."
    )
  return privatization_lib.privatize(privacy, num_queries=num_scores)


@registry.estimator(
  "pazo_s",
  public_data="batches",
  learning_rate=0.1,
  privatize=privatization,
)
def pazo_s(
  privacy,
  *,
  learning_rate: float,
  num_public_batches: int = 4,
  candidate_noise_scale: float = 0.0,
  extra_candidate: bool = True,
  direction_key=0,
  direction_prng: str = "threefry",
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """PAZO-S (PAZO Alg. 3): select the best public gradient by private loss.

  Lines 4-14 (:func:`_candidate_selection`): each of ``k`` public gradients
  is scored by its noisy clipped private loss ``f_j`` (``clip`` bounds each
  per-example *loss value*), plus the perturbed best ``g_j^ + z'``, ``z' ~
  N(0, s^2 I_d)`` (``s``: a perturbation scale, not a privacy parameter).

  Returns ``g_{j*}`` (line 15: chain ``optax.sgd(eta)`` after it; the
  candidates are scored at ``x - learning_rate g_j``); ``state.released``
  holds the ``k(+1)`` noisy scores. Privacy: ``k(+1)`` loss-value queries on
  one batch, each with noise variance ``(k+1) C^2 sigma^2``: one Gaussian of
  ``noise_multiplier`` per step at ``p = b/n`` (the adaptive last query by
  Dong et al. 2022 Thm. 3.2). Cost (Table 6): ``k + 1`` private forward
  passes, ``k`` public forward+backward.

  Args:
    privacy: the privacy value: its ``clip`` ``C`` bounds each per-example
      loss value (default 1.0), its ``noise_multiplier`` is ``sigma``, its
      sampling's expected batch size ``b``; the ``k(+1)`` queries are
      derived here (its noise: as :func:`pazo_m`, exact by default: one
      discrete Gaussian, ``k(+1)`` queries).
    learning_rate: ``eta`` of the candidate steps ``x - eta g_j``.
    num_public_batches: ``k``.
    candidate_noise_scale: ``s`` (the paper's ``epsilon``), ``>= 0``.
    extra_candidate: whether to add the perturbed candidate ``g_j^ + z'``.
    direction_key, direction_prng: as :func:`pazo_m` (``direction_prng``
      applies to ``z'``).

  Per-example contract, secret noise keys and ``physical_batch_size``: see
  :mod:`zoprivacy.estimators.base`.
  """
  privacy = privatization(
    privacy,
    dict(
      num_public_batches=num_public_batches, extra_candidate=extra_candidate
    ),
  )
  k, learning_rate, candidate_noise_scale = _candidate_settings(
    num_public_batches, learning_rate, extra_candidate, candidate_noise_scale
  )
  validation.one_of("direction_prng", direction_prng, directions_lib.PRNG_IMPLS)
  compute = _candidate_selection(
    k=k,
    learning_rate=learning_rate,
    mechanism=privacy.mechanism,
    batch_size=privacy.expected_batch_size,
    extra_candidate=extra_candidate,
    candidate_noise_scale=candidate_noise_scale,
    direction_prng=direction_prng,
  )
  return base.build_estimator(
    compute,
    direction_key=direction_key,
    privacy=privacy,
    num_released=privacy.plan.num_queries,  # the k(+1) scores
    physical_batch_size=physical_batch_size,
  )


def _candidate_selection(
  *,
  k,
  learning_rate,
  mechanism,
  batch_size,
  extra_candidate,
  candidate_noise_scale,
  direction_prng,
):
  """PAZO-S Alg. 3 lines 4-15 as ``compute(params, args, dir_key,
  noise_key) -> (g_{j*}, noisy scores)``.

  Lines 4-9: ``k`` public gradients ``g_j`` from ``k`` public batches; each
  candidate step ``x - eta g_j`` is scored by ``f_j = (1/b) sum_i
  clip_C(f(x - eta g_j; xi_i)) + z`` with ``z ~ (1/b) N(0, (k+1) C^2
  sigma^2)``: ``clip`` bounds each per-example *loss value* (NaN -> 0,
  ``+-inf`` -> ``+-C``). Line 10: ``j^ = argmin f_j``. Lines 11-14 (with
  ``extra_candidate``): ``g_{k+1} = g_j^ + z'``, ``z' ~ N(0, s^2 I_d)`` with
  ``s = candidate_noise_scale`` (a perturbation scale, *not* a privacy
  parameter; conventions §6), scored the same way, and ``j* = argmin_{j <=
  k+1} f_j``.
  """

  def compute(params, args, dir_key, noise_key):
    public_batches = public_data.get_public_batches(args, k)
    candidates_noise_key, extra_noise_key = jax.random.split(noise_key)
    grads = public_data.public_gradients(
      public_data.public_loss_fn(args), params, public_batches
    )

    def clipped_losses(g):
      """``clip_C(f(x - eta g; xi_i))``: one private forward pass, ``[B]``."""
      losses = args.loss(
        queries.perturb(params, g, -learning_rate), args.batch
      ).astype(jnp.float32)
      return clipping.clip_scalars(losses, mechanism.clip)

    def noisy_scores(key, clipped, first):
      """The noised means of the columns of ``clipped`` ``[B, j]``; exact
      noise reads the step's draws ``first .. first + j``."""
      noise = args.discrete_noise
      if noise is not None:
        noise = jnp.asarray(noise)[first : first + clipped.shape[1]]
      return mechanism.privatize_sum(key, clipped, args.mask, noise) / (
        batch_size
      )

    clipped = jax.lax.map(clipped_losses, grads).T  # [B, k]
    scores = noisy_scores(candidates_noise_key, clipped, 0)
    g_best = jax.tree.map(lambda g: g[jnp.argmin(scores)], grads)
    if not extra_candidate:
      return g_best, scores
    # Lines 11-14: the perturbed best candidate, scored the same way.
    z = directions_lib.gaussian(dir_key, params, direction_prng)
    g_extra = jax.tree.map(
      lambda g, n: g + (candidate_noise_scale * n).astype(g.dtype), g_best, z
    )
    extra = noisy_scores(extra_noise_key, clipped_losses(g_extra)[:, None], k)
    scores = jnp.concatenate([scores, extra])
    take_extra = jnp.argmin(scores) == k
    grad = jax.tree.map(
      lambda e, g: jnp.where(take_extra, e, g), g_extra, g_best
    )
    return grad, scores

  return compute


def _candidate_settings(
  num_public_batches, learning_rate, extra_candidate, candidate_noise_scale
):
  """``(k, learning_rate, candidate_noise_scale)`` checked: ``k`` a positive
  int, the rate positive, ``extra_candidate`` a bool and the scale a finite
  float ``>= 0``."""
  k = validation.positive_int("num_public_batches", num_public_batches)
  learning_rate = validation.positive("learning_rate", learning_rate)
  if not isinstance(extra_candidate, bool):
    raise ValueError(
      f"extra_candidate must be a bool, got {extra_candidate!r}."
    )
  try:
    candidate_noise_scale = float(candidate_noise_scale)
  except (TypeError, ValueError):
    candidate_noise_scale = math.nan
  if not 0.0 <= candidate_noise_scale < math.inf:
    raise ValueError(
      "candidate_noise_scale must be a finite number >= 0 (a "
      "perturbation scale, not a privacy epsilon)."
    )
  return k, learning_rate, candidate_noise_scale
