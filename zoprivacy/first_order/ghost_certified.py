"""Ghost clipping with proven float bounds: the input of exact noise.

Exact noise on ghost clipping (:mod:`zoprivacy.secret_noise.
rounded_sum_mechanism`) rounds the clipped *sum* to an integer grid and
needs a bound on how far that sum moves when one example is added or
removed, float rounding included. This module gives the two pieces, in
IEEE-754 single precision with correctly rounded ``+ - * / sqrt``
(``u = 2^-24``; ``gamma(n) = n u / (1 - n u)``, Higham 2002, Lemma 3.1):

**A certified norm** ``N_b >= ||v_b||``, ``v_b`` the example's gradient
in exact arithmetic from its own (float) activations ``x_bt`` and output
gradients ``g_bt`` (or its own per-example gradient, where one is formed).
Each part of a layer gives its computed squared norm ``s`` and an
"absolute" size ``A`` with ``|s - ||v||^2| <= gamma(n) A^2``:

* ghost norm of a dense kernel, ``s = sum_{t,s} <x_t, x_s> <g_t, g_s>``:
  each inner product is off by at most ``gamma(d) ||x_t|| ||x_s||`` (any
  summation order), their product by ``gamma(d_in + d_out + 1)
  X_t X_s G_t G_s``, the sum of ``T^2`` terms by ``gamma(T^2)`` more, so
  ``A = sum_t ||x_t|| ||g_t||`` and ``n = d_in + d_out + T^2 + 2``; an
  embedding is the case ``x_t`` one-hot (``||x_t|| = 1``);
* a gradient formed per example (a bias, a kernel with ``T^2 > d_in
  d_out``, a local or explicit layer), ``s = sum v^2``: ``A = sqrt(s)``,
  ``n = size + 2``.

``A`` itself is computed within ``gamma(n)`` (norms of length ``d``, ``T``
products, one sum), so ``A (1 + gamma(n))`` bounds the true one. Then
``N^2 = (sum_parts max(s, 0) + gamma(n) (A (1 + gamma(n)))^2) (1 +
gamma(P + 4))`` over the ``P`` parts (nonnegative terms, ``P - 1``
additions and four roundings), and ``N = sqrt(N^2) (1 + 2^-16)`` (the
margin covers the square root's rounding many times over). A non-finite
bound drops the example (factor 0).

**A bound on the float error of the sum.** A sum ``fl(sum_i c_i x_i
y_i^T)`` over ``L`` terms (a batch times positions), with ``c_i`` applied
in float, is off by at most ``gamma(L + 1) sum_i c_i |x_i| |y_i|^T``
entrywise, whose Frobenius norm is at most ``gamma(L + 1) sum_b c_b A_b``
(rank-one terms). Over the parts (disjoint coordinates), by Minkowski's
inequality, the error is at most ``gamma(L_max + 1) sum_b c_b A~_b`` with
``A~_b = sqrt(sum_parts A^2)``. The factor also caps ``c_b A~_b <= kappa
C`` with ``kappa = sqrt(T_max)`` (``T_max`` the most positions a ghost
norm sums over; 1 for a model without sequences, where ``A~_b`` is
``||v_b||`` up to rounding and the cap never binds), so a batch of ``B``
rows is off by at most ``E = gamma(L_max + 1) B kappa C`` whatever its
contents. The cap clips an example harder only when its positions'
contributions cancel (``||v_b|| < A~_b / kappa``).

**The factor** ``c_b = min(1, C / N_b, kappa C / A~_b) (1 - 2^-16)``
(the margin covers the division), 0 for a padded or non-finite row: so
``||c_b v_b|| <= C`` exactly. Sums are formed at ``Precision.HIGHEST``
(float32 products on the CPU and the GPU, never TF32 or bfloat16) and
kept in float32 (a bfloat16 model's sum is not rounded to bfloat16).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

U = 2.0**-24
MARGIN = 2.0**-16
PLATFORMS = ("cpu", "gpu", "cuda", "rocm")


def gamma(n: int) -> float:
  """``n u / (1 - n u)``: the relative error of ``n`` float32 roundings."""
  if n * U >= 0.5:
    raise ValueError(f"No float32 error bound for {n} operations.")
  return n * U / (1.0 - n * U)


class Part(NamedTuple):
  """One part of a layer's per-example gradient: computed squared norms
  ``sq [B]``, absolute sizes ``absolute [B]``, the count ``terms`` of its
  norm's error bound, and how many terms its sum adds per example
  (``positions``: 1 for a gradient formed per example)."""

  sq: jax.Array
  absolute: jax.Array
  terms: int
  positions: int


class SumBound(NamedTuple):
  """What bounds the float error of the clipped sum: ``rows`` (the
  physical batch), ``length`` (the longest sum, in terms) and ``ratio``
  (``kappa``)."""

  rows: int
  length: int
  ratio: float

  def error(self, clip: float) -> float:
    """``E = gamma(length + 1) rows kappa C``."""
    return gamma(self.length + 1) * self.rows * self.ratio * float(clip)


def object_part(sq, size: int) -> Part:
  """A gradient formed per example, of ``size`` entries."""
  return Part(sq, jnp.sqrt(jnp.maximum(sq, 0.0)), int(size) + 2, 1)


def ghost_part(sq, x_norms, g_norms, d_in: int, d_out: int) -> Part:
  """A ghost norm over ``T`` positions (``x_norms``, ``g_norms``: ``[B,
  T]``, ``||x_t||`` and ``||g_t||``)."""
  positions = int(x_norms.shape[1])
  absolute = jnp.sum(x_norms * g_norms, axis=1)
  terms = int(d_in) + int(d_out) + positions * positions + positions + 8
  return Part(sq, absolute, terms, positions)


def row_norms(x):
  """``||x_t||`` over the last axis (``[B, T, d] -> [B, T]``)."""
  return jnp.sqrt(jnp.sum(jnp.square(x), axis=-1))


def _bound(absolute, terms: int):
  return absolute * jnp.float32(1.0 + gamma(terms))


def certified_sizes(parts):
  """``(N [B], A~ [B], kappa)``: the certified norms, the bounds of the
  absolute sizes and the cap ratio (module docstring)."""
  spread = jnp.float32(1.0 + gamma(len(parts) + 4))
  sq = sum(
    jnp.maximum(p.sq, 0.0)
    + jnp.float32(gamma(p.terms)) * _bound(p.absolute, p.terms) ** 2
    for p in parts
  )
  norm = jnp.sqrt(sq * spread) * jnp.float32(1.0 + MARGIN)
  total = sum(_bound(p.absolute, p.terms) ** 2 for p in parts)
  absolute = jnp.sqrt(total * spread) * jnp.float32(1.0 + MARGIN)
  return norm, absolute, math.sqrt(max(p.positions for p in parts))


def certified_factor(parts, clip: float, keep, rows: int):
  """``(c [B], SumBound)``: the clip factors of the module docstring and
  the bound of the sum's float error; ``keep``: rows that count."""
  norm, absolute, ratio = certified_sizes(parts)
  size = jnp.maximum(norm, absolute / jnp.float32(ratio))
  ok = keep & jnp.isfinite(size)
  factor = jnp.minimum(1.0, clip / jnp.maximum(size, 1e-30)) * (1.0 - MARGIN)
  factor = jnp.where(ok, factor, 0.0)
  length = max(p.positions for p in parts) * int(rows)
  return factor, SumBound(int(rows), length, ratio)


def check_platform() -> None:
  """Refuses a backend whose ``Precision.HIGHEST`` is not float32
  arithmetic (a TPU's is several bfloat16 passes)."""
  platform = jax.default_backend()
  if platform not in PLATFORMS:
    raise ValueError(
      "Exact noise on ghost clipping bounds the float error of the clipped "
      "sum for IEEE float32 arithmetic, which Precision.HIGHEST gives on the "
      f"CPU and the GPU; on {platform!r} it does not. Use "
      "per_example_clipping='explicit' (exact noise on the per-example "
      "lattice), or pass noise='secure_mode' (floating point, exposed to "
      "precision attacks) explicitly."
    )
