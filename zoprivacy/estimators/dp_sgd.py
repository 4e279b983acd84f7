"""DP-SGD (Abadi et al. 2016): the first-order baseline, same calling convention.

Per-example gradients by ``jax.vmap(jax.grad(...))``, per-example L2
clipping, Gaussian noise on the sum, division by the expected batch size.
Takes the same ``per_example_loss`` / ``batched_loss``, ``batch`` and ``mask``
extra arguments as the zeroth-order estimators, so benchmarks can swap them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoprivacy.core import physical_batches, validation
from zoprivacy.estimators import base, registry
from zoprivacy.first_order import ghost_clipping
from zoprivacy.mechanisms import clipping
from zoprivacy.mechanisms import noise as mechanisms
from zoprivacy.privacy import privatization as privatization_lib
from zoprivacy.secret_noise import rounded_sum_mechanism as rounded_sum
from zoprivacy.secret_noise import vector_discrete_mechanism as vector_exact
from zoprivacy.zo import queries

PER_EXAMPLE_CLIPPING = ("explicit", "ghost")


def vector_privatization(privacy, arguments) -> base.Privatization:
  """:func:`privatization` of a DP-SGD-like factory's privacy value and
  bound ``arguments`` (ghost clipping where it takes
  ``per_example_clipping='ghost'``): what the registrations of DP-SGD,
  DPMD, DOPE-SGD and DPGD-0th declare."""
  ghost = arguments.get("per_example_clipping") == "ghost"
  return privatization(privacy, ghost=ghost)


@registry.estimator("dp_sgd", learning_rate=0.2, privatize=vector_privatization)
def dp_sgd(
  privacy,
  *,
  per_example_clipping: str = "explicit",
  direction_key=0,
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """DP-SGD's privatized gradient (Abadi et al. 2016, Alg. 1 lines 5-8).

  ``g = (sum_i clip_C(grad f(x; xi_i)) + N(0, sigma^2 C^2 I_d)) / B``, with
  ``C`` the value's clip on the per-example gradient's L2 norm (default
  1.0), ``sigma`` its noise multiplier and ``B`` its expected batch size.

  Privacy, from the value ``privacy``: sensitivity ``C`` (L2, add/remove;
  ``2C`` replace-one), noise std ``sigma C`` per coordinate, event
  ``GaussianDpEvent(sigma)`` sampled at ``p = B/n``; one Gaussian query
  (the value's ``num_queries`` and ``mechanism`` stay 1 and 'gaussian').

  ``per_example_clipping='ghost'`` computes the same clipped sum without
  per-example gradients for the layers
  :mod:`zoprivacy.first_order.ghost_clipping` supports (flax Dense, Embed, Conv,
  LayerNorm; the others fall back to per-example gradients layer by layer,
  with a warning naming them), equal to the explicit path to about 1e-6 at a fraction of its memory. The
  default, ``'explicit'``, materializes ``vmap(grad)``.

  Exact noise (the default, ``zoprivacy.Exact()``): each clipped
  per-example gradient is quantized to an integer lattice of proven L2
  sensitivity and the integer sum gets exact discrete Gaussian noise
  (:class:`~zoprivacy.secret_noise.vector_discrete_mechanism.VectorDiscreteGaussianMechanism`,
  accounted by a subsampled RDP bound; add/remove only); with ghost
  clipping the float sum is rounded to a grid and the noise scaled to a
  proven bound of the rounded sum's sensitivity, float error included
  (:mod:`zoprivacy.secret_noise.rounded_sum_mechanism`; CPU and GPU).
  ``zoprivacy.SecureMode()`` draws each coordinate's float Gaussian as the
  scaled sum of 4 independent draws (Opacus' ``secure_mode``, Holohan &
  Braghin 2021); ``zoprivacy.Float()`` opts in to plain floating-point
  noise; both are exposed to floating-point attacks (Mironov 2012). The
  plan names which.

  ``physical_batch_size``: the per-example gradients (or ghost norms) are
  formed that many rows at a time, each chunk's clipped sum added to the
  batch's (:func:`private_gradient`, :func:`ghost_gradient`).

  Per-example contract, secret noise keys and ``physical_batch_size``: see
  :mod:`zoprivacy.estimators.base`.
  """
  return estimator(
    privacy,
    per_example_clipping=per_example_clipping,
    direction_key=direction_key,
    physical_batch_size=physical_batch_size,
  )


def estimator(
  privacy,
  *,
  per_example_clipping: str,
  direction_key,
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """DP-SGD's estimator from its privacy value (:func:`dp_sgd`)."""
  validation.one_of(
    "per_example_clipping", per_example_clipping, PER_EXAMPLE_CLIPPING
  )
  privacy = privatization(privacy, ghost=per_example_clipping == "ghost")

  def gradient(params, args, direction_key, noise_key):
    del direction_key
    if per_example_clipping == "ghost":
      return ghost_gradient(privacy, params, args, noise_key)
    return private_gradient(privacy, params, args, noise_key)

  return base.build_vector_estimator(
    gradient,
    direction_key=direction_key,
    privacy=privacy,
    physical_batch_size=physical_batch_size,
  )


def privatization(privacy, *, ghost: bool = False) -> base.Privatization:
  """The vector estimators' mechanism and plan from the value ``privacy``
  (one Gaussian query, clip 1.0 by default): exact vector noise for
  :class:`~zoprivacy.Exact` (on the per-example lattice, or on the rounded
  sum for ``ghost``), else the floating-point Gaussian."""
  privatization_lib.require_one_gaussian(privacy, "A vector estimator releases")
  if privacy.noise.kind != "exact":
    return privatization_lib.privatize(privacy)
  mech = vector_exact.VectorDiscreteGaussianMechanism(
    1.0 if privacy.clip is None else privacy.clip,
    privatization_lib.noise_multiplier(privacy),
    privacy.neighboring,
  )
  if ghost:
    mech = rounded_sum.RoundedSumDiscreteGaussianMechanism(
      mech.clip, mech.noise_multiplier, mech.neighboring
    )
  return privatization_lib.of_mechanism(mech, privacy)


def ghost_gradient(privacy, params, args, noise_key):
  """DP-SGD's privatized mean gradient by ghost clipping: exact noise on
  the rounded sum with certified factors and its float error bound, or
  the float mechanism on the plain clipped sum; over physical chunks
  (``args.physical_batch_size``), each chunk's sum added to the batch's
  (the certified bound covers the additions)."""
  mech = privacy.mechanism
  if isinstance(mech, rounded_sum.RoundedSumDiscreteGaussianMechanism):
    sums, bound = ghost_clipping.certified_clipped_sum(
      args, params, clip=mech.clip
    )
    noisy = mech.privatize_sum(noise_key, sums, bound, like=params)
    return jax.tree.map(lambda x: x / privacy.expected_batch_size, noisy)
  clipped_sum, _ = physical_batches.sum_rows(
    lambda batch, mask: ghost_clipping.clipped_gradient_sum(
      args._replace(batch=batch, mask=mask), params, clip=mech.clip
    )[0],
    args.batch,
    args.mask,
    args.physical_batch_size,
  )
  return base.noisy_mean(privacy, noise_key, clipped_sum)


def private_gradient(privacy, params, args, noise_key, *, origin=None):
  """The privatized mean gradient of Abadi et al. 2016, Alg. 1 lines 5-8.

  ``(sum_i clip_C(grad_i - o) + N(0, sigma^2 C^2 I)) / B + o`` with the
  clipping origin ``o`` zero (DP-SGD) or a public vector (DOPE-SGD, Nasr
  et al. 2023). Padded rows (``args.mask``) never reach the sum; the noise
  is ``privacy``'s mechanism keyed by the secret ``noise_key``. The
  per-example gradients are formed one physical chunk at a time
  (``args.physical_batch_size``); each chunk's clipped sum is added to the
  total: in int32 on the exact noise's lattice (the same integers as the
  whole batch's), else in float.
  """
  mech = privacy.mechanism
  lattice = isinstance(mech, vector_exact.VectorDiscreteGaussianMechanism)
  grid = mech.grid(physical_batches.rows_of(args.batch)) if lattice else None

  def clipped_sum(batch, mask):
    per_example = queries.per_example_gradients(args, params, batch)
    if origin is not None:
      per_example = jax.tree.map(lambda g, o: g - o[None], per_example, origin)
    clipped, _ = clipping.clip_tree_per_example(per_example, mech.clip)
    if lattice:
      return mech.lattice_sum(vector_exact.tree_rows(clipped), mask, grid)
    return mechanisms.masked_tree_sum(clipped, mask)

  total, _ = physical_batches.sum_rows(
    clipped_sum, args.batch, args.mask, args.physical_batch_size
  )
  if lattice:
    noisy = mech.release_tree(noise_key, total, grid, params)
    noisy_mean = jax.tree.map(lambda x: x / privacy.expected_batch_size, noisy)
  else:
    noisy_mean = base.noisy_mean(privacy, noise_key, total)
  if origin is None:
    return noisy_mean
  return jax.tree.map(jnp.add, origin, noisy_mean)
