"""Exact discrete noise on a quantized sum: the default scalar mechanism.

Its sensitivity, its noise and its accounting are stated on
:class:`DiscreteMechanism`, next to the code that adds the noise; the
floating-point mechanisms are in :mod:`zoprivacy.mechanisms.noise`, which
re-exports these names.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import jax
import jax.numpy as jnp

from zoprivacy.core import validation
from zoprivacy.core.masked_sums import masked_sum

_INT32_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class DiscreteMechanism:
  """Exact integer noise on a quantized sum of clipped scalars.

  Each clipped per-example value ``v`` (``|v| <= clip``) is quantized to the
  integer ``k = round(v * grid_points / clip)``, so ``|k| <= m`` with
  ``m = grid_points``; the integers are summed exactly and integer noise
  drawn on the host by an exact sampler (Canonne, Kamath, Steinke 2020) is
  added. The release is an integer times ``clip / grid_points``: it carries
  no floating-point artefact that depends on the data (Mironov 2012).
  Quantizing each value (not the sum) keeps the sensitivity at ``m``, not
  one grid step more. dp_accounting has no ``DpEvent`` for these noises:
  the plan is accounted by its discrete PLDs
  (:mod:`zoprivacy.accounting.discrete_pld`, connect-the-dots).

  Discrete Gaussian (``kind='gaussian'``), ``q = num_queries`` scalars from
  one Poisson batch. One example moves each integer sum by at most ``m``
  (integer sensitivity ``m`` per query, ``m * 1`` the worst shift of the
  ``q``-vector); each sum gets an independent discrete Gaussian with
  ``s = noise_multiplier * m * sqrt(q)`` (the continuous ``sqrt(q) sigma
  C``). Under the shift ``m * 1`` the likelihood ratio depends on the noise
  only through its sum ``S``, and ``S``, a sum of ``q`` discrete Gaussians,
  is the discrete Gaussian of parameter ``s sqrt(q)`` up to a relative
  error below ``1e-300`` for ``s >= 10`` (Poisson summation over the
  ``A_{q-1}`` lattice, :mod:`zoprivacy.accounting.discrete_pld`). So the
  ``q`` releases are composed *before* subsampling into one discrete
  Gaussian with sigma ``noise_multiplier * m * q`` and integer sensitivity
  ``q m``; every other shift in ``[-m, m]^q`` is dominated (the discrete
  Gaussian's shifts are ordered by monotone likelihood ratio, and trade-off
  functions compose monotonically). PLD: ``from_discrete_gaussian_mechanism
  (sigma, sensitivity=q m, sampling_prob=p)``, add/remove; replace-one: the
  same noise with dp_accounting's REPLACE pair (shifts ``-q m`` and ``+q m``).

  Discrete Laplace (``kind='laplace'``), add/remove: each query's scale is
  ``noise_multiplier * m * q`` (the continuous ``sigma q C``, L1). One
  query: PLD ``from_discrete_laplace_mechanism``; ``q`` queries: the
  ``q`` releases composed before subsampling through a sufficient
  statistic, :mod:`zoprivacy.accounting.discrete_laplace_queries`.
  """

  clip: float
  noise_multiplier: float
  grid_points: int = 1024
  kind: Literal["gaussian", "laplace"] = "gaussian"
  num_queries: int = 1
  neighboring: validation.Neighboring = "add_or_remove"

  def __post_init__(self):
    if self.kind not in ("gaussian", "laplace"):
      raise ValueError(f"Unknown discrete noise kind {self.kind!r}.")
    validation.one_of(
      "neighboring", self.neighboring, validation.NEIGHBORING_RELATIONS
    )
    if self.kind == "laplace" and self.neighboring != "add_or_remove":
      raise ValueError(
        "Exact discrete Laplace noise covers add/remove neighbouring only "
        "(as the floating-point Laplace: dp_accounting has no replace-one "
        "Laplace PLD); use mechanism='gaussian'."
      )
    if (
      isinstance(self.grid_points, bool)
      or int(self.grid_points) != self.grid_points
      or not 1 <= self.grid_points <= 2**20
    ):
      raise ValueError(
        "grid_points must be an integer in [1, 2**20], got "
        f"{self.grid_points!r}."
      )
    if self.num_queries > 1 and self.integer_noise_scale < 10:
      raise ValueError(
        "With several queries the discrete Gaussian's sigma in grid units "
        f"({self.integer_noise_scale:g}) must be >= 10: raise grid_points."
      )

  @property
  def name(self) -> str:
    return "discrete_" + self.kind

  @property
  def contribution_bound(self) -> float:
    return self.clip

  @property
  def integer_noise_scale(self) -> float:
    """Each query's discrete Gaussian sigma (``noise_multiplier * m *
    sqrt(q)``), or discrete Laplace scale, in grid units."""
    return integer_noise_scale(
      self.kind, self.noise_multiplier, self.grid_points, self.num_queries
    )

  @property
  def noise_std(self) -> float:
    """Noise std of each query in the units of the clipped values
    (approximately)."""
    factor = 1.0 if self.kind == "gaussian" else math.sqrt(2.0)
    return factor * self.integer_noise_scale * self.clip / self.grid_points

  def quantize(self, clipped: jax.Array) -> jax.Array:
    k = jnp.round(clipped.astype(jnp.float32) * (self.grid_points / self.clip))
    return jnp.clip(k, -self.grid_points, self.grid_points).astype(jnp.int32)

  def privatize_sum(self, noise_key, clipped, mask, discrete_noise=None):
    """Quantize, sum integers, add the step's exact integer noise.

    ``discrete_noise`` is the step's ``int32[q]`` noise, which the
    estimator's update fetches from the host sampler by itself
    (:mod:`zoprivacy.secret_noise.host_noise`) unless the caller passed it.
    """
    del noise_key
    if discrete_noise is None:
      raise ValueError(
        "This estimator uses exact discrete noise and received none: call "
        "it through its update (which draws the noise itself), or pass the "
        "step's integer noise as the extra argument discrete_noise= (drawn "
        "by zoprivacy.privacy.ExactNoiseSource)."
      )
    if clipped.shape[0] * self.grid_points > _INT32_MAX:
      raise ValueError(
        "Batch too large for an int32 sum at this grid; lower grid_points."
      )
    ints = masked_sum(self.quantize(clipped), mask)
    noise = jnp.asarray(discrete_noise).astype(jnp.int32).reshape(ints.shape)
    return exact_release(ints, noise) * (self.clip / self.grid_points)


def exact_release(ints: jax.Array, noise: jax.Array) -> jax.Array:
  """``float32(ints + noise)``, computed without int32 wrap-around.

  ``|ints| <= 2**31 - 1`` (the batch check above) and ``|noise| <= 2**30``
  (the host sampler refuses larger draws), so the exact sum may exceed the
  int32 range (2047 rows at a grid of ``2**20`` plus noise near ``2**30``).
  Each operand is split into 16-bit halves, ``x = 2**16 h + l`` with
  ``0 <= l < 2**16``; the halves are added with a carry, exactly, and the
  float32 result is one correctly rounded addition of the two exact float32
  parts ``2**16 h`` and ``l`` (``|h| < 2**17``): a function of the exact
  integer sum only, never of how it splits into data and noise.
  """
  lo = (ints & 0xFFFF) + (noise & 0xFFFF)  # in [0, 2**17)
  hi = (ints >> 16) + (noise >> 16) + (lo >> 16)  # arithmetic shifts
  lo = lo & 0xFFFF
  return hi.astype(jnp.float32) * 65536.0 + lo.astype(jnp.float32)


def integer_noise_scale(
  kind: str, noise_multiplier: float, grid_points: int, num_queries: int
) -> float:
  """Per-query discrete Gaussian sigma or discrete Laplace scale (grid
  units) of a discrete mechanism; the sampler and the plan both read it."""
  scale = float(noise_multiplier) * int(grid_points)
  if kind == "gaussian":
    return scale * math.sqrt(num_queries)
  return scale * num_queries
