"""GEP (Yu et al. 2021): gradient embedding perturbation with public anchors.

``g = V (e + N_0)/B + (r + N_1)/B``: each private gradient is split into its
embedding ``e`` in a ``k``-dim anchor subspace ``V`` (spanned by public
gradients, :func:`anchor_subspace`) and a residual ``r``; both are clipped
and noised. The two Gaussian releases compose into one Gaussian
(:class:`GEPMechanism`).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import dp_accounting
import jax
import jax.flatten_util
import jax.numpy as jnp

from zoprivacy.core import linalg, physical_batches, validation
from zoprivacy.estimators import base, public_data, registry
from zoprivacy.mechanisms import clipping
from zoprivacy.mechanisms import noise as mechanisms
from zoprivacy.privacy import privatization as privatization_lib
from zoprivacy.secret_noise import vector_discrete_mechanism as vector_exact
from zoprivacy.secret_noise import vector_noise_prefetch
from zoprivacy.zo import queries

# ---------------------------------------------------------------------- GEP


@dataclasses.dataclass(frozen=True)
class GEPMechanism:
  """GEP's two Gaussian releases on one batch, accounted as one Gaussian.

  Released: the sum of per-example embeddings clipped at ``C0`` (in the
  ``k``-dim anchor subspace) with noise ``N(0, sigma_0^2 C0^2 I_k)``, and the
  sum of per-example residuals clipped at ``C1`` (in ``R^d``) with noise
  ``N(0, sigma_1^2 C1^2 I_d)``.

  Sensitivity (add/remove): ``C0`` for the embedding sum, ``C1`` for the
  residual sum (twice each under replace-one, applied by the accountant).
  Scaling each part by ``1 / (sigma_i C_i)`` makes the noise ``N(0, I)`` and
  one example's contribution at most ``sqrt(sigma_0^-2 + sigma_1^-2)`` in
  L2, so the pair is exactly one Gaussian mechanism with
  ``sigma_eff = (sigma_0^-2 + sigma_1^-2)^{-1/2}`` (Gaussian DP composition,
  Dong et al. 2022 Cor. 3.3; GEP, Yu et al. 2021 Thm 3.1). That single
  Gaussian is the ``dp_event``, which a PLD accountant can subsample
  (``composed_dp_event`` is the equivalent two-event form).
  """

  embedding_clip: float
  residual_clip: float
  embedding_noise_multiplier: float
  residual_noise_multiplier: float
  neighboring: mechanisms.Neighboring = "add_or_remove"
  # Opacus' secure_mode defence on both parts' Gaussians (Holohan & Braghin
  # 2021); the plan names it.
  float_defence: str = "secure_mode"

  def __post_init__(self):
    validation.one_of(
      "neighboring", self.neighboring, mechanisms.NEIGHBORING_RELATIONS
    )

  @property
  def embedding(self) -> mechanisms.GaussianMechanism:
    return self._part(self.embedding_clip, self.embedding_noise_multiplier)

  @property
  def residual(self) -> mechanisms.GaussianMechanism:
    return self._part(self.residual_clip, self.residual_noise_multiplier)

  def _part(self, clip, noise_multiplier) -> mechanisms.GaussianMechanism:
    return mechanisms.GaussianMechanism(
      clip, noise_multiplier, 1, self.neighboring, self.float_defence
    )

  @property
  def noise_multiplier(self) -> float:
    """``sigma_eff = (sigma_0^-2 + sigma_1^-2)^{-1/2}``."""
    return (
      self.embedding_noise_multiplier**-2 + self.residual_noise_multiplier**-2
    ) ** -0.5

  num_queries = 1  # one (composed) Gaussian release per step
  name = "gaussian"  # accounted as one Gaussian with ``noise_multiplier``

  @property
  def clip(self) -> float:
    """The embedding clip (the residual has its own, ``residual_clip``)."""
    return self.embedding_clip

  @property
  def noise_std(self) -> tuple[float, float]:
    """``(sigma_0 C0, sigma_1 C1)``: std per embedding / residual coordinate."""
    return self.embedding.noise_std, self.residual.noise_std

  @property
  def l2_sensitivity(self) -> tuple[float, float]:
    return self.embedding.l2_sensitivity, self.residual.l2_sensitivity

  def dp_event(self) -> dp_accounting.DpEvent:
    return dp_accounting.GaussianDpEvent(self.noise_multiplier)

  def composed_dp_event(self) -> dp_accounting.DpEvent:
    return dp_accounting.ComposedDpEvent(
      [self.embedding.dp_event(), self.residual.dp_event()]
    )

  def add_noise(self, key: jax.Array, sums):
    """Noises ``(embedding_sum, residual_sum)`` each with its own std."""
    embedding_sum, residual_sum = sums
    key_0, key_1 = jax.random.split(key)
    return (
      self.embedding.add_noise(key_0, embedding_sum),
      self.residual.add_noise(key_1, residual_sum),
    )


def anchor_subspace(
  key, anchor_gradients: jax.Array, num_bases: int, power_iterations: int = 1
) -> jax.Array:
  """GEP's anchor subspace: ``[d, k]`` orthonormal columns by power iteration.

  ``anchor_gradients`` is the ``[b', d]`` matrix ``P`` of per-example public
  gradients. ``V ~ N(0, 1)^{d x k}``; ``power_iterations`` times ``V <- P^T
  (P V)`` then orthonormalize (QR with the sign fix, the Gram-Schmidt of
  GEP's code). The key is public randomness.
  """
  dim = anchor_gradients.shape[1]
  v = jax.random.normal(key, (dim, num_bases), jnp.float32)
  for _ in range(power_iterations):
    v = anchor_gradients.T @ (anchor_gradients @ v)
    v = linalg.orthonormalize_rows(v.T).T
  return v


def _privatization(privacy, a) -> tuple[base.Privatization, tuple]:
  """GEP's privatization and its two parts (embedding, residual) from its
  privacy value (its clip is the embedding clip ``C0``, default 1.0; its
  multiplier the effective one) and (bound) arguments ``a``: the
  mechanism, its plan and the two parts."""
  privatization_lib.require_one_gaussian(privacy, "GEP releases (composed)")
  embedding_clip = 1.0 if privacy.clip is None else privacy.clip
  residual_clip = validation.positive("residual_clip", a["residual_clip"])
  split = _split_noise(
    privacy.noise_multiplier,
    a["embedding_noise_multiplier"],
    a["residual_noise_multiplier"],
  )
  mechanism, parts = _mechanisms(
    embedding_clip,
    residual_clip,
    split,
    privacy.neighboring,
    privacy.noise.kind,
  )
  return privatization_lib.of_mechanism(mechanism, privacy), parts


@registry.estimator(
  "gep",
  public_data="batch",
  learning_rate=0.3,
  privatize=lambda privacy, a: _privatization(privacy, a)[0],
  aliases={"embedding_clip": "clip"},
)
def gep(
  privacy,
  *,
  num_bases: int,
  residual_clip: float = 0.5,
  embedding_noise_multiplier: float | None = None,
  residual_noise_multiplier: float | None = None,
  power_iterations: int = 1,
  direction_key=0,
  physical_batch_size: int | None = None,
) -> base.PrivateEstimator:
  """GEP (Yu et al. 2021, gradient embedding perturbation), first order.

  Anchor subspace ``V`` (``d x k``, :func:`anchor_subspace`) from the
  per-example gradients of ``public_batch``. Per private example ``g_i``:
  embedding ``e_i = V^T g_i`` clipped at ``C0``, residual ``r_i = g_i - V
  e_i`` clipped at ``C1``. Update ``V (sum e_i + N(0, sigma_0^2 C0^2 I_k)) /
  b + (sum r_i + N(0, sigma_1^2 C1^2 I_d)) / b``.

  The privacy value ``privacy``: its clip is the embedding clip ``C0``
  (default 1.0; ``residual_clip`` ``C1`` is GEP's own). Noise: the value's
  ``noise_multiplier`` sigma (the effective one; both parts then get
  ``sqrt(2) sigma``, the equal split of GEP's code, and a target calibrates
  it), or, with no multiplier in the value, both
  ``embedding_noise_multiplier`` and ``residual_noise_multiplier``.
  Privacy: :class:`GEPMechanism`, one Gaussian with ``sigma_eff``
  Poisson-sampled at ``p = b/n``. ``noise='exact'`` (the default): each
  part on its own integer lattice with exact discrete Gaussian noise
  (:class:`~zoprivacy.secret_noise.vector_discrete_mechanism.VectorDiscreteGaussianMechanism`),
  the pair accounted as one exact vector mechanism with ``sigma_eff`` (Renyi
  divergences add: ``alpha / (2 sigma_0^2) + alpha / (2 sigma_1^2)``);
  ``'secure_mode'`` / ``'float'``: floating-point Gaussians, exposed to
  floating-point attacks. Cost (Table 6): ``b`` private and ``b'``
  public forward+backward (both vmapped); memory ``O((b + b') d)``.

  Per-example contract, secret noise keys and ``physical_batch_size``: see
  :mod:`zoprivacy.estimators.base`.
  """
  privacy, parts = _privatization(
    privacy,
    dict(
      residual_clip=residual_clip,
      embedding_noise_multiplier=embedding_noise_multiplier,
      residual_noise_multiplier=residual_noise_multiplier,
    ),
  )
  num_bases = validation.positive_int("num_bases", num_bases)
  power_iterations = validation.positive_int(
    "power_iterations", power_iterations
  )
  mechanism = privacy.mechanism

  gradient = functools.partial(
    _private_gradient,
    num_bases=num_bases,
    power_iterations=power_iterations,
    clips=(float(mechanism.clip), float(residual_clip)),
    mechanism=mechanism,
    parts=parts,
    batch_size=privacy.expected_batch_size,
  )
  return base.build_vector_estimator(
    gradient,
    direction_key=direction_key,
    privacy=privacy,
    physical_batch_size=physical_batch_size,
  )


def _private_gradient(
  params,
  args,
  dir_key,
  noise_key,
  *,
  num_bases,
  power_iterations,
  clips,
  mechanism,
  parts,
  batch_size,
):
  """GEP's update direction: the noised clipped embeddings mapped back
  through ``V`` plus the noised clipped residuals, over ``b``. The
  per-example gradients are formed one physical chunk at a time, each
  chunk's clipped sums added to the batch's (in int32 on the lattices of
  exact noise)."""
  v = _anchors(params, args, dir_key, num_bases, power_iterations)
  rows = physical_batches.rows_of(args.batch)
  grids = None if parts is None else tuple(p.grid(rows) for p in parts)

  def clipped_sums(batch, mask):
    grads, _ = public_data.flatten_stacked(
      queries.per_example_gradients(args, params, batch)
    )
    embedding = grads @ v  # [P, k]
    residual = grads - embedding @ v.T  # [P, d]
    clipped = (
      clipping.clip_tree_per_example(embedding, clips[0])[0],
      clipping.clip_tree_per_example(residual, clips[1])[0],
    )
    if parts is None:
      return tuple(mechanisms.masked_sum(c, mask) for c in clipped)
    return tuple(
      part.lattice_sum(c, mask, grid)
      for part, c, grid in zip(parts, clipped, grids)
    )

  sums, _ = physical_batches.sum_rows(
    clipped_sums, args.batch, args.mask, args.physical_batch_size
  )
  if parts is not None:
    noisy = _exact_parts(parts, noise_key, sums, grids)
  else:
    noisy = mechanism.add_noise(noise_key, sums)
  flat = (v @ noisy[0] + noisy[1]) / batch_size
  _, unravel = jax.flatten_util.ravel_pytree(params)
  dtype = jax.tree.leaves(params)[0].dtype
  return jax.tree.map(
    lambda g, p: g.astype(p.dtype), unravel(flat.astype(dtype)), params
  )


def _mechanisms(embedding_clip, residual_clip, split, neighboring, noise):
  """``(mechanism, parts)``: the accounted mechanism, and under exact noise
  (``parts`` not None) each part's own lattice mechanism. Exact: one vector
  discrete Gaussian with GEP's effective multiplier; float: the
  :class:`GEPMechanism` pair."""
  mechanism = GEPMechanism(
    embedding_clip,
    residual_clip,
    split[0],
    split[1],
    neighboring,
    "secure_mode" if noise == "secure_mode" else "none",
  )
  if noise != "exact":
    return mechanism, None
  parts = (
    vector_exact.VectorDiscreteGaussianMechanism(
      embedding_clip, split[0], neighboring
    ),
    vector_exact.VectorDiscreteGaussianMechanism(residual_clip, split[1]),
  )
  return vector_exact.VectorDiscreteGaussianMechanism(
    embedding_clip, mechanism.noise_multiplier, neighboring
  ), parts


def _split_noise(noise_multiplier, embedding, residual) -> tuple[float, float]:
  """``(sigma_0, sigma_1)``: both given, or ``sqrt(2) sigma`` each (the
  equal split of GEP's code) from the effective ``noise_multiplier``."""
  split = (embedding, residual)
  if noise_multiplier is not None:
    if any(s is not None for s in split):
      raise ValueError(
        "Pass either noise_multiplier or both embedding_noise_multiplier and "
        "residual_noise_multiplier, not both forms."
      )
    sigma = validation.positive("noise_multiplier", noise_multiplier)
    split = (math.sqrt(2.0) * sigma, math.sqrt(2.0) * sigma)
  elif any(s is None for s in split):
    raise ValueError(
      "GEP needs noise_multiplier, or both embedding_noise_multiplier and "
      "residual_noise_multiplier."
    )
  return (
    validation.positive("embedding_noise_multiplier", split[0]),
    validation.positive("residual_noise_multiplier", split[1]),
  )


def _anchors(params, args, dir_key, num_bases, iterations):
  """``V``: the anchor subspace from the public batch's per-example
  gradients."""
  public_batch = public_data.get_public_batch(args)
  anchors, _ = public_data.flatten_stacked(
    queries.per_example_gradients(args, params, public_batch)
  )
  if num_bases > anchors.shape[1]:
    raise ValueError(
      f"num_bases={num_bases} exceeds the dimension {anchors.shape[1]}."
    )
  return anchor_subspace(dir_key, anchors, num_bases, iterations)


def _exact_parts(parts, noise_key, sums, grids):
  """Each part's integer sum released on its own lattice with exact noise."""
  if isinstance(noise_key, vector_noise_prefetch.NoiseStep):
    keys = (noise_key.part(0), noise_key.part(1))
  else:
    keys = jax.random.split(noise_key)
  return tuple(
    part.release(k, ints, grid)
    for part, k, ints, grid in zip(parts, keys, sums, grids)
  )
