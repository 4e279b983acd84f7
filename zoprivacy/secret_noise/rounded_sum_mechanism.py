"""Exact noise on a clipped sum formed in float: ghost clipping's lattice.

Ghost clipping (:mod:`zoprivacy.first_order.ghost_clipping`) never forms
the per-example gradients, so they cannot be put on a lattice one by one
(:class:`~zoprivacy.secret_noise.vector_discrete_mechanism.
VectorDiscreteGaussianMechanism`). Its float32 sum ``S~`` is rounded
instead, and the noise is calibrated to a sensitivity proven for the
rounded sum:

* **Grid.** ``gamma = 2^-k``, the largest power of two at most ``C /
  sum_grid`` (``sum_grid = 2^16`` by default), so ``K = round(S~ /
  gamma)`` scales exactly (a power of two) and rounds each coordinate by
  at most ``1/2``, half to even, deterministically; ``K`` is held to
  ``+-2^30`` (a 1-Lipschitz map per coordinate, NaN to 0).
* **Sensitivity.** Let ``D' = D + {z}``. The sums in exact arithmetic
  differ by ``c_z v_z``, of norm at most ``C`` (the certified factor,
  :mod:`zoprivacy.first_order.ghost_certified`); each float sum is off by
  at most ``E = gamma(L + 1) B kappa C`` (the same module); rounding moves
  each by at most ``sqrt(d) / 2`` grid steps. So ``||K(D) - K(D')||_2 <=
  (C + 2 E) / gamma + sqrt(d) = Delta``, an integer-valued L2 sensitivity,
  provided each example's own computation (its activations, gradients and
  factor) does not depend on the other rows, the per-example contract of
  every estimator. ``Delta`` depends on the physical batch ``B``, the
  longest sum ``L`` and ``d``, all static: it is computed when the step is
  traced. At ``B = 64`` (one position per example), ``d = 4.2M``: ``2 E /
  C = 0.05%``, ``gamma sqrt(d) / C = 3.1%``.
* **Noise.** i.i.d. discrete Gaussian of integer sigma ``s = ceil(sigma
  Delta)`` (the grid is coarsened if ``s`` would pass ``2^24``), drawn on
  the device (:func:`~zoprivacy.secret_noise.vector_discrete_mechanism.
  draw_noise`). Renyi DP ``alpha Delta^2 / (2 s^2) <= alpha / (2
  sigma^2)``: the accounting of the per-example lattice, unchanged
  (:mod:`zoprivacy.accounting.subsampled_rdp`). The release ``(K + N)
  gamma`` is an integer times a fixed step.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.core import validation
from zoprivacy.mechanisms.discrete import exact_release
from zoprivacy.secret_noise import device_tables
from zoprivacy.secret_noise import vector_discrete_mechanism as lattice

SUM_GRID = 2**16
LIMIT = 2**30
MAX_INFLATION = 1.0  # refuse a float-error bound above C (twice the noise)
WARN_INFLATION = 0.1


@dataclasses.dataclass(frozen=True)
class RoundedSumDiscreteGaussianMechanism(lattice.ClippedSumScale):
  """Exact discrete Gaussian noise on a rounded float clipped sum (module
  docstring): the sensitivity ``Delta`` is proven when the step is traced,
  and the noise is scaled to it."""

  clip: float
  noise_multiplier: float
  neighboring: validation.Neighboring = "add_or_remove"
  sum_grid: int = SUM_GRID

  name = "rounded_sum_discrete_gaussian"
  num_queries = 1

  def __post_init__(self):
    lattice.VectorDiscreteGaussianMechanism(
      self.clip, self.noise_multiplier, self.neighboring
    )  # the same refusals (replace-one)

  def grid_exponent(self, bound, dim: int) -> int:
    """``k`` of the grid ``2^-k``: the finest at most ``C / sum_grid``
    whose sigma stays at most ``2^24``."""
    k = math.floor(math.log2(self.sum_grid / self.clip))
    while (
      k > -1000 and self.integer_sigma(bound, dim, k) > device_tables.MAX_SIGMA
    ):
      k -= 1
    return k

  def sensitivity(self, bound, dim: int, k: int) -> float:
    """``Delta = (C + 2 E) 2^k + sqrt(d)``, rounded up."""
    inflation = 2.0 * bound.error(self.clip)
    delta = (self.clip + inflation) * 2.0**k + math.sqrt(dim)
    return delta * (1.0 + 1e-12)

  def integer_sigma(self, bound, dim: int, k: int) -> int:
    """``ceil(noise_multiplier Delta)``."""
    return max(
      int(math.ceil(self.noise_multiplier * self.sensitivity(bound, dim, k))), 1
    )

  def check_bound(self, bound) -> float:
    """``2 E / C``; refuses above :data:`MAX_INFLATION`, warns above 10%."""
    inflation = 2.0 * bound.error(self.clip) / self.clip
    if inflation > MAX_INFLATION:
      raise ValueError(
        f"Exact noise on ghost clipping: the proven float error of the "
        f"clipped sum ({bound.rows} rows, sums of {bound.length} terms) "
        f"is {inflation:.0%} of the clip, so the noise would grow by as "
        "much. Use a smaller physical batch (physical_batch_size=, the "
        "same logical batch and privacy), per_example_clipping='explicit' "
        "(exact noise on the per-example lattice, no float error), or pass "
        "noise='secure_mode' (floating point, exposed to precision attacks)."
      )
    if inflation > WARN_INFLATION:
      warnings.warn(
        f"Exact noise on ghost clipping: the proven float error of the "
        f"clipped sum adds {inflation:.1%} of the clip to the sensitivity "
        "(and the noise); a smaller physical batch (physical_batch_size=) "
        "lowers it.",
        stacklevel=3,
      )
    return inflation

  def add_noise(self, key, clipped_sum):
    del key, clipped_sum
    raise ValueError(
      "Exact noise on a float sum needs the bound of its float error: "
      "privatize_sum(noise_key, sums, bound) (ghost clipping gives both)."
    )

  def privatize_sum(self, noise_key, sums, bound, like=None):
    """The noisy clipped sum, on the lattice ``gamma Z`` (module docstring).

    ``sums``: float32 tree (the clipped sum); ``bound``: its
    :class:`~zoprivacy.first_order.ghost_certified.SumBound`; ``like``: a
    tree whose dtypes the release takes (default: ``sums``').
    """
    leaves, treedef = jax.tree.flatten(sums)
    flat = jnp.concatenate([x.reshape(-1).astype(jnp.float32) for x in leaves])
    dim = int(flat.shape[0])
    self.check_bound(bound)
    k = self.grid_exponent(bound, dim)
    ints = rounded(flat, k)
    noise = lattice.draw_noise(
      noise_key, self.integer_sigma(bound, dim, k), dim
    )
    out = exact_release(ints, noise) * jnp.float32(2.0**-k)
    dtypes = [
      jnp.result_type(x)
      for x in jax.tree.leaves(like if like is not None else sums)
    ]
    pieces, start = [], 0
    for x, dtype in zip(leaves, dtypes):
      size = int(np.prod(x.shape, dtype=np.int64))
      pieces.append(out[start : start + size].reshape(x.shape).astype(dtype))
      start += size
    return jax.tree.unflatten(treedef, pieces)


def rounded(flat, k: int):
  """``int32``: ``round(flat 2^k)`` held to ``+-2^30`` (NaN to 0), exact
  scaling by a power of two, half to even."""
  scaled = jnp.nan_to_num(
    flat * jnp.float32(2.0**k), nan=0.0, posinf=LIMIT, neginf=-LIMIT
  )
  return jnp.clip(jnp.round(scaled), -LIMIT, LIMIT).astype(jnp.int32)
