"""DP-SGD (Abadi et al. 2016): the first-order baseline, same calling convention.

Per-example gradients by ``jax.vmap(jax.grad(...))``, per-example L2
clipping, Gaussian noise on the sum, division by the expected batch size.
Takes the same ``per_example_loss`` / ``batched_loss``, ``batch`` and ``mask``
extra arguments as the zeroth-order estimators, so benchmarks can swap them.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from zoprivacy.core import physical_batches, validation
from zoprivacy.estimators import base, registry
from zoprivacy.estimators.privacy_args import PrivacyArgs
from zoprivacy.first_order import ghost_clipping
from zoprivacy.mechanisms import clipping
from zoprivacy.mechanisms import noise as mechanisms
from zoprivacy.secret_noise import rounded_sum_mechanism as rounded_sum
from zoprivacy.secret_noise import vector_discrete_mechanism as vector_exact
from zoprivacy.zo import queries

PER_EXAMPLE_CLIPPING = ("explicit", "ghost")


def vector_privatization(arguments) -> base.Privatization:
  """:func:`privatization` of a DP-SGD-like factory's bound ``arguments``
  (ghost clipping where it takes ``per_example_clipping='ghost'``): what
  the registrations of DP-SGD, DPMD, DOPE-SGD and DPGD-0th declare."""
  ghost = arguments.get("per_example_clipping") == "ghost"
  return privatization(PrivacyArgs.of_arguments(arguments), ghost=ghost)


@registry.estimator("dp_sgd", learning_rate=0.2, privatize=vector_privatization)
def dp_sgd(
  *,
  clip: float = 1.0,
  noise_multiplier: float,
  expected_batch_size: float,
  dataset_size: int | None = None,
  neighboring: str = "add_or_remove",
  direction_key=0,
  insecure_test_noise_seed: int | None = None,
  per_example_clipping: str = "explicit",
  noise: str = "exact",
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """DP-SGD's privatized gradient (Abadi et al. 2016, Alg. 1 lines 5-8).

  ``g = (sum_i clip_C(grad f(x; xi_i)) + N(0, sigma^2 C^2 I_d)) / B``.

  Privacy: sensitivity ``C`` (L2, add/remove; ``2C`` replace-one), noise std
  ``sigma C`` per coordinate, event ``GaussianDpEvent(sigma)`` Poisson-sampled
  at ``p = B/n``.

  ``per_example_clipping='ghost'`` computes the same clipped sum without
  per-example gradients for the layers
  :mod:`zoprivacy.first_order.ghost_clipping` supports (flax Dense, Embed, Conv,
  LayerNorm; the others fall back to per-example gradients layer by layer,
  with a warning naming them), equal to the explicit path to about 1e-6 at a fraction of its memory. The
  default, ``'explicit'``, materializes ``vmap(grad)``.

  ``noise='exact'`` (the default): each clipped per-example gradient is
  quantized to an integer lattice of proven L2 sensitivity and the integer
  sum gets exact discrete Gaussian noise
  (:class:`~zoprivacy.secret_noise.vector_discrete_mechanism.VectorDiscreteGaussianMechanism`,
  accounted by a subsampled RDP bound; add/remove only); with ghost
  clipping the float sum is rounded to a grid and the noise scaled to a
  proven bound of the rounded sum's sensitivity, float error included
  (:mod:`zoprivacy.secret_noise.rounded_sum_mechanism`; CPU and GPU).
  ``noise='secure_mode'`` draws each coordinate's float Gaussian as
  the scaled sum of 4 independent draws (Opacus' ``secure_mode``, Holohan &
  Braghin 2021); ``noise='float'`` opts in to plain floating-point noise;
  both are exposed to floating-point attacks (Mironov 2012). The plan names
  which.

  ``physical_batch_size``: the per-example gradients (or ghost norms) are
  formed that many rows at a time, each chunk's clipped sum added to the
  batch's (:func:`private_gradient`, :func:`ghost_gradient`).

  Per-example contract, secret noise keys and ``physical_batch_size``: see
  :mod:`zoprivacy.estimators.base`.
  """
  return estimator(
    PrivacyArgs(
      clip=clip,
      noise_multiplier=noise_multiplier,
      expected_batch_size=expected_batch_size,
      dataset_size=dataset_size,
      neighboring=neighboring,
      noise=noise,
      insecure_test_noise_seed=insecure_test_noise_seed,
    ),
    per_example_clipping=per_example_clipping,
    direction_key=direction_key,
    physical_batch_size=physical_batch_size,
  )


def estimator(
  privacy_args: PrivacyArgs,
  *,
  per_example_clipping: str,
  direction_key,
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """DP-SGD's estimator from its privacy arguments (:func:`dp_sgd`)."""
  validation.one_of(
    "per_example_clipping", per_example_clipping, PER_EXAMPLE_CLIPPING
  )
  validation.one_of("noise", privacy_args.noise, base.NOISE_KINDS)
  privacy = privatization(privacy_args, ghost=per_example_clipping == "ghost")

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


def privatization(
  privacy: PrivacyArgs, *, ghost: bool = False
) -> base.Privatization:
  """The vector estimators' mechanism and plan: exact vector noise for
  ``noise='exact'`` (on the per-example lattice, or on the rounded sum for
  ``ghost``), else the floating-point Gaussian (``privacy_spec``)."""
  if privacy.noise != "exact":
    return privacy.privatization()
  build = rounded_sum.ghost_privacy if ghost else vector_exact.vector_privacy
  mech, plan = build(dataclasses.asdict(privacy), base.make_plan)
  return base.Privatization(mech, plan, privacy.insecure_test_noise_seed)


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
