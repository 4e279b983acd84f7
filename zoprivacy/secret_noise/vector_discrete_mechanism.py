"""Exact vector noise: an integer lattice with a proven L2 sensitivity.

The default of the vector estimators (DP-SGD, DPMD, DOPE-SGD, GEP,
DPGD-0th). Its sensitivity, its noise and its accounting are stated on
:class:`VectorDiscreteGaussianMechanism`, next to the code that adds the
noise; the sampler is :mod:`zoprivacy.secret_noise.device_discrete_gaussian`
(the host's :mod:`zoprivacy.secret_noise.vector_discrete_noise` is the
reference), the accountant :mod:`zoprivacy.accounting.subsampled_rdp`.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.core import validation
from zoprivacy.core.masked_sums import masked_sum
from zoprivacy.mechanisms.discrete import exact_release
from zoprivacy.secret_noise import (
  device_discrete_gaussian,
  noise_binding,
  vector_discrete_noise,
  vector_noise_prefetch,
)

MAX_GRID = 2**19  # integer sensitivity M: a coordinate stays below 2**20
COORD_LIMIT = 2**20 - 1
_BLOCK = 1024  # int32 block sums of the split squares cannot overflow
_U = 2.0**-24  # float32 unit roundoff
# Covers the float32 roundings of the rescale factor (sqrt, division,
# product; correctly rounded on CPU, within a few ulps on GPU): 16 ulps.
_MARGIN = 1.0 - 2.0**-20
_INT32_MAX = 2**31 - 1


def _pow2_floor(x: float) -> int:
  return 1 << max(int(math.floor(math.log2(x))), 0) if x >= 1 else 0


def certified_sq_norms(k: jax.Array) -> jax.Array:
  """``float32[B]`` upper bounds on ``||k_b||^2`` of ``int32[B, d]`` rows
  with ``|k| <= 2**20 - 1``, whatever order XLA sums in.

  ``|k| = 2**10 h + l`` (``h, l < 2**10``): ``k^2 = 2**20 h^2 + 2**10 (2hl)
  + l^2``. Each part is summed exactly in int32 over blocks of 1024
  (at most ``1024 * 2 * 1023^2 < 2**31``); the ``nb = ceil(d / 1024)``
  block values are formed and summed in float32, nonnegative terms, with
  relative error below ``(nb + 3) u`` (``u = 2**-24``; Higham, Accuracy and
  Stability, Thm. 4.3 / Lemma 3.1, for any summation order). The result is
  scaled by ``1 + 4 (nb + 4) u``.
  """
  b, d = k.shape
  nb = -(-d // _BLOCK)
  a = jnp.abs(k)
  a = jnp.pad(a, ((0, 0), (0, nb * _BLOCK - d))).reshape(b, nb, _BLOCK)
  hi, lo = a >> 10, a & (_BLOCK - 1)
  parts = (
    jnp.sum(hi * hi, axis=-1, dtype=jnp.int32).astype(jnp.float32),
    jnp.sum(2 * hi * lo, axis=-1, dtype=jnp.int32).astype(jnp.float32),
    jnp.sum(lo * lo, axis=-1, dtype=jnp.int32).astype(jnp.float32),
  )
  blocks = parts[0] * 2.0**20 + parts[1] * 2.0**10 + parts[2]
  return jnp.sum(blocks, axis=-1) * jnp.float32(1.0 + 4.0 * (nb + 4) * _U)


def reclip_rows(k: jax.Array, bound: int) -> jax.Array:
  """``int32[B, d]`` rows scaled toward zero so that ``||row||_2 <= bound``
  exactly: ``sign(k) floor(|k| f)`` with ``f <= bound / ||k||`` (the
  certified norm, :func:`certified_sq_norms`, times a 16-ulp margin).
  Truncation never raises a magnitude, so no rounding term is added."""
  sq = certified_sq_norms(k)
  limit = jnp.float32(float(bound) ** 2)
  f = jnp.where(sq > limit, (bound / jnp.sqrt(sq)) * _MARGIN, 1.0)
  mag = jnp.floor(jnp.abs(k).astype(jnp.float32) * f[:, None])
  return (jnp.sign(k) * mag.astype(jnp.int32)).astype(jnp.int32)


SAMPLERS = ("device", "host")
# The sampler of exact vector noise: 'device' (the default; jitted integer
# code, constant time, zoprivacy.secret_noise.device_discrete_gaussian) or
# 'host' (the int64 numpy reference, prefetched off the step's timing
# path). Read when a step is traced.
DEFAULT_SAMPLER = "device"


def draw_noise(noise_key, sigma: int, size: int, sampler=None) -> jax.Array:
  """``int32[size]`` exact discrete Gaussian noise of integer ``sigma``.

  ``noise_key``: a :class:`~zoprivacy.secret_noise.vector_noise_prefetch.
  NoiseStep` (the plan-bound key and the step) or a plain per-step key.
  ``sampler``: 'device' (by default, :data:`DEFAULT_SAMPLER`): drawn by
  jitted integer code from the key's four words and the step
  (:func:`~zoprivacy.secret_noise.device_discrete_gaussian.draw`, constant
  time); 'host': the numpy reference, drawn ahead of the step in the
  background and copied by the step's host callback for a ``NoiseStep``
  (:func:`~zoprivacy.secret_noise.vector_noise_prefetch.draw_in_jit`), by
  a pure callback for a plain key. Either way the same on every host
  holding the key.
  """
  sampler = DEFAULT_SAMPLER if sampler is None else sampler
  validation.one_of("sampler", sampler, SAMPLERS)
  stepped = isinstance(noise_key, vector_noise_prefetch.NoiseStep)
  if sampler == "device":
    key, step = (noise_key.key, noise_key.step) if stepped else (noise_key, 0)
    words = noise_binding.key_words(key)
    words = jnp.pad(words, (0, max(4 - words.shape[0], 0)))[:4]
    sigma = vector_discrete_noise.check_sigma(sigma)
    return device_discrete_gaussian.draw(words, step, sigma, size)
  if stepped:
    return vector_noise_prefetch.draw_in_jit(noise_key, sigma, size)

  def host(words):
    return vector_discrete_noise.draw(np.asarray(words), sigma, size)

  words = noise_binding.key_words(noise_key)
  shape = jax.ShapeDtypeStruct((size,), jnp.int32)
  return jax.pure_callback(host, shape, words, vmap_method="expand_dims")


class ClippedSumScale:
  """A clipped sum's contribution bound (``clip``) and its noise std per
  coordinate in the units of the sum (at least ``noise_multiplier *
  clip``)."""

  @property
  def contribution_bound(self) -> float:
    return self.clip

  @property
  def noise_std(self) -> float:
    """Noise std per coordinate in the units of the sum (at least)."""
    return self.noise_multiplier * self.clip


@dataclasses.dataclass(frozen=True)
class VectorDiscreteGaussianMechanism(ClippedSumScale):
  """Exact multivariate discrete Gaussian noise on a quantized vector sum.

  Lattice: one example's contribution, clipped at ``clip`` in L2, becomes
  an integer vector of L2 norm at most ``M`` (:meth:`grid`, a power of two
  up to ``2**19``): the integer L2 sensitivity under add/remove is ``M``,
  proven in integer arithmetic (:meth:`privatize_rows`,
  :meth:`privatize_direction`), whatever the float errors before it.

  Noise: i.i.d. discrete Gaussian of integer sigma ``s = ceil(
  noise_multiplier * M)`` on every coordinate of the integer sum, drawn
  on the device in constant time (:func:`draw_noise`; within ``2^-112`` of
  exact per draw, which the plan adds to delta). The release is
  ``(sum + noise) * clip / M`` (an integer times a fixed step): it has no
  floating-point artefact that depends on the data (Mironov 2012).

  Accounting: Renyi DP ``alpha M^2 / (2 s^2) <= alpha / (2
  noise_multiplier^2)`` per step (Canonne, Kamath & Steinke 2020), Poisson
  subsampled at integer orders as the sampled Gaussian
  (:mod:`zoprivacy.accounting.subsampled_rdp` states the argument);
  add/remove only.
  """

  clip: float
  noise_multiplier: float
  neighboring: validation.Neighboring = "add_or_remove"

  name = "vector_discrete_gaussian"
  num_queries = 1

  def __post_init__(self):
    if self.neighboring != "add_or_remove":
      raise ValueError(
        "Exact vector noise is accounted under add/remove neighbouring only "
        "(the subsampled RDP bound); for replace-one pass noise='secure_mode'"
        " (floating point, exposed to precision attacks) explicitly."
      )

  def grid(self, batch_rows: int) -> int:
    """``M``: the largest power of two up to ``2**19`` with ``batch_rows *
    M <= 2**31 - 1`` (the int32 sum cannot overflow) and ``sigma <=
    2**24`` (the sampler's int64 bound). Refuses a grid below 16."""
    caps = (
      MAX_GRID,
      _pow2_floor(_INT32_MAX / max(int(batch_rows), 1)),
      _pow2_floor(vector_discrete_noise.MAX_SIGMA / self.noise_multiplier),
    )
    grid = min(caps)
    if grid < 16:
      raise ValueError(
        f"No integer grid fits a batch of {batch_rows} rows at noise "
        f"multiplier {self.noise_multiplier:g} without int32 overflow; "
        "lower the batch size."
      )
    return grid

  def integer_sigma(self, grid: int) -> int:
    """``ceil(noise_multiplier * M)``: at least the accounted ratio."""
    return int(math.ceil(self.noise_multiplier * grid))

  def add_noise(self, key, clipped_sum):
    del key, clipped_sum
    raise ValueError(
      "Exact vector noise quantizes each example's clipped contribution and "
      "cannot noise a float sum (ghost clipping computes only the sum): use "
      "per-example clipping, or pass noise='secure_mode' explicitly."
    )

  def privatize_rows(self, noise_key, rows: jax.Array, mask) -> jax.Array:
    """``float32[d]``: the noisy sum of ``rows [B, d]`` (each clipped at
    ``clip`` in L2, in float), released on the lattice.

    ``k_b = round(rows_b M / clip)`` (coordinates held to ``2**20 - 1``),
    rescaled in integers to ``||k_b|| <= M`` (:func:`reclip_rows`: the
    certified bound, no float error can raise it); masked rows are zero;
    the int32 sum (``|.| <= B M <= 2**31 - 1``) gets exact discrete
    Gaussian noise. Rounding moves a row by at most ``sqrt(d) / 2`` grid
    steps (``sqrt(d) / (2 M)`` of the clip: 0.1% at ``d = 10**6``,
    ``M = 2**19``) before the rescale, which only shrinks it.
    """
    grid = self.grid(rows.shape[0])
    return self.release(noise_key, self.lattice_sum(rows, mask, grid), grid)

  def lattice_sum(self, rows: jax.Array, mask, grid: int) -> jax.Array:
    """``int32[d]``: the sum of the real rows of ``rows [b, d]`` on the
    lattice of ``grid`` (:meth:`privatize_rows`). Sums of disjoint chunks
    of a batch add up, in integers, to the batch's exactly, with ``grid``
    the batch's (:meth:`grid` of its rows bounds every partial sum)."""
    x = jnp.nan_to_num(
      rows.astype(jnp.float32) * (grid / self.clip),
      nan=0.0,
      posinf=COORD_LIMIT,
      neginf=-COORD_LIMIT,
    )
    k = jnp.clip(jnp.round(x), -COORD_LIMIT, COORD_LIMIT).astype(jnp.int32)
    return masked_sum(reclip_rows(k, grid), mask)

  def release(self, noise_key, ints: jax.Array, grid: int) -> jax.Array:
    """``float32[d]``: the integer sum ``ints`` plus exact discrete
    Gaussian noise, on the lattice of ``grid``."""
    noise = draw_noise(noise_key, self.integer_sigma(grid), ints.shape[0])
    return exact_release(ints, noise) * jnp.float32(self.clip / grid)

  def release_tree(self, noise_key, ints: jax.Array, grid: int, like):
    """:meth:`release` cut into a tree shaped and typed like ``like``
    (the integer sum of rows flattened by :func:`tree_rows`)."""
    leaves, treedef = jax.tree.flatten(like)
    flat = self.release(noise_key, ints, grid)
    return jax.tree.unflatten(treedef, _split_like(flat, leaves, batched=False))

  def direction_grid(self, batch_rows: int, dim: int) -> tuple[int, int]:
    """``(M, m)`` for :meth:`privatize_direction`: ``m (1 + 8 u B) +
    ceil(sqrt(d)) + 1 <= M``; refuses when rounding would cost over half."""
    grid = self.grid(batch_rows)
    slack = math.isqrt(dim) + 2
    m = int((grid - slack) / (1.0 + 8.0 * _U * batch_rows))
    if m < grid // 2:
      raise ValueError(
        f"The lattice cannot hold a {dim}-dimensional direction at a batch "
        f"of {batch_rows}: the rounding would exceed half the sensitivity."
      )
    return grid, m

  def privatize_direction(self, noise_key, scalars, mask, direction):
    """The noisy ``sum_b scalars_b * direction`` (DPGD-0th), on the lattice.

    ``scalars [B]``: each example's clipped coefficient times
    ``||direction||`` (so ``|.| <= clip``). ``kappa_b = round(scalars_b m /
    clip)`` held to ``[-m, m]``, ``K = sum kappa_b`` exactly (int32). The
    direction ``e`` is quantized once (``round(2**19 u / ||u||)``) and
    scaled by ``beta`` with ``beta ||e|| <= 1`` (certified norm). The
    released integers ``V(K) = round(K beta e)`` satisfy ``||V(K) -
    V(K')|| <= |K - K'| + 6.02 u B m + sqrt(d) <= M`` for ``|K - K'| <= m``
    (three float32 roundings of ``K beta e_j`` on each side, half a step
    of rounding per coordinate): integer sensitivity ``M``.
    """
    leaves, treedef = jax.tree.flatten(direction)
    flat = jnp.concatenate([x.reshape(-1).astype(jnp.float32) for x in leaves])
    b, d = scalars.shape[0], flat.shape[0]
    grid, m = self.direction_grid(b, d)
    kappa = jnp.round(
      jnp.nan_to_num(scalars.astype(jnp.float32) * (m / self.clip))
    )
    kappa = jnp.clip(kappa, -m, m).astype(jnp.int32)
    v = direction_lattice(masked_sum(kappa, mask), flat)
    noise = draw_noise(noise_key, self.integer_sigma(grid), d)
    out = exact_release(v, noise) * jnp.float32(self.clip / m)
    return jax.tree.unflatten(treedef, _split_like(out, leaves, batched=False))


def tree_rows(per_example) -> jax.Array:
  """``float32[B, d]``: each example's leaves of ``per_example`` (leading
  axis ``B``) flattened into one row."""
  leaves = jax.tree.leaves(per_example)
  b = leaves[0].shape[0]
  return jnp.concatenate(
    [x.reshape(b, -1).astype(jnp.float32) for x in leaves], axis=1
  )


def direction_lattice(total: jax.Array, direction: jax.Array) -> jax.Array:
  """``int32[d]``: ``round(total beta e)``, ``e`` the quantized unit
  ``direction`` and ``beta ||e|| <= 1`` (certified); the integers of
  :meth:`VectorDiscreteGaussianMechanism.privatize_direction`."""
  norm = jnp.sqrt(jnp.sum(jnp.square(direction)))
  e = jnp.round(jnp.nan_to_num(direction * (2.0**19 / norm)))
  e = jnp.clip(e, -COORD_LIMIT, COORD_LIMIT).astype(jnp.int32)
  sq = certified_sq_norms(e[None])[0]
  beta = jnp.where(sq > 0, _MARGIN / jnp.sqrt(sq), 0.0)
  v = jnp.round(total.astype(jnp.float32) * beta * e.astype(jnp.float32))
  return v.astype(jnp.int32)


def snap_step(noise_std: float, dimension: int, bound: float) -> float:
  """The lattice step of :func:`snap_to_lattice`: the power of two at or
  below ``max(noise_std / (256 sqrt(dimension)), (bound + 64 noise_std) /
  2**29)``: fine against the noise per coordinate, coarse enough that
  values up to ``bound`` plus 64 noise stds fit the ``+-2**30`` steps."""
  fine = float(noise_std) / math.sqrt(max(int(dimension), 1)) / 256.0
  wide = (float(bound) + 64.0 * float(noise_std)) / 2.0**29
  return 2.0 ** math.floor(math.log2(max(fine, wide)))


def snap_to_lattice(noise_key, tree, step: float):
  """``step (round(x / step) + D)`` per coordinate: a float release snapped
  to the lattice ``step Z`` plus exact discrete Gaussian noise ``D`` (sigma
  1, full support on the integers, ``|D| <= 2**30``).

  The defence of the floating-point releases that stay (Noisy-ZOGD): every
  output lies in ``step Z``, and any lattice point ``r`` is reached from any
  float value ``x`` by ``D = r / step - round(x / step)``, so each output
  is possible in both neighbouring worlds, whatever the float noise did
  (a precision test can make no certain decision; it is no accounting).
  ``step`` is a power of two, so the divisions and products are exact;
  ``round(x / step)`` is held to ``+-2**30``.
  """
  leaves, treedef = jax.tree.flatten(tree)
  flat = jnp.concatenate([x.reshape(-1).astype(jnp.float32) for x in leaves])
  out = snap_with_noise(flat, step, draw_noise(noise_key, 1, flat.shape[0]))
  return jax.tree.unflatten(treedef, _split_like(out, leaves, batched=False))


def snap_with_noise(flat: jax.Array, step: float, noise: jax.Array):
  """``step (round(flat / step) + noise)``, exactly (int32 noise)."""
  ints = jnp.round(jnp.nan_to_num(flat / step))
  ints = jnp.clip(ints, -(2**30), 2**30).astype(jnp.int32)
  return exact_release(ints, noise) * jnp.float32(step)


def _split_like(flat, leaves, *, batched: bool):
  """``flat`` cut into the shapes (without a leading batch axis if
  ``batched``) and dtypes of ``leaves``."""
  out, start = [], 0
  for x in leaves:
    shape = x.shape[1:] if batched else x.shape
    size = int(np.prod(shape, dtype=np.int64))
    out.append(flat[start : start + size].reshape(shape).astype(x.dtype))
    start += size
  return out
