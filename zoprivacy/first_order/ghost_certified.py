"""Ghost clipping with proven float bounds: the input of exact noise.

Exact noise on ghost clipping (:mod:`zoprivacy.secret_noise.
rounded_sum_mechanism`) rounds the clipped *sum* to an integer grid and
needs a bound on how far that sum moves when one example is added or
removed, float rounding included. This module gives the two pieces, in
IEEE-754 single precision with correctly rounded ``+ - * / sqrt``
(``u = 2^-24``; ``gamma(n) = n u / (1 - n u)``, Higham 2002, Lemma 3.1),
under every float behaviour: each operation's result is off by a relative
``u`` *plus* an absolute ``mu = 2^-125``, which covers a result flushed to
zero (jitted CPU code flushes subnormals), gradual underflow and an input
read as zero (denormals-are-zero); overflow and NaN are refused.

**Scaling before squaring.** A record whose inputs are ``1e18`` has output
gradients near ``1e-19``: their squares flush to zero while the products
``x g`` are ordinary numbers, so an unscaled ghost norm certifies a
fraction of the true norm. Every factor is therefore scaled per example
by a power of two first (:func:`scale`): ``x' = x 2^-k`` with ``k`` the
exponent of the example's largest ``|x|`` (at least ``-100``), so every
``|x'| < 1``. Scaling is exact except where an entry falls below the
normal range; each entry then moves by at most ``rho = 2^(-124 -
min(k, 0))``. The norm of ``v = 2^(k_x + k_g) v'`` is certified in the
scaled units, where nothing overflows and each flush costs at most
``mu`` times a bounded size. An example whose largest dense factor
reaches ``2^64`` (``2^126`` for a gradient formed per example), or is not
finite, gets factor 0 (it contributes nothing, as a non-finite one
always did).

**A certified norm** ``N_b >= ||v_b||``, ``v_b`` the example's gradient
in exact arithmetic from its own (float) activations ``x_bt`` and output
gradients ``g_bt`` (or its own per-example gradient, where one is formed).
Each part of a layer gives, in its scaled units, its computed squared norm
``s``, an absolute size ``A`` (including its flush allowance), a flush
allowance ``eta`` on ``s`` and the bound ``nu`` on how far the scaling
moved the gradient, with ``||v'||^2 <= s + gamma(n) A^2 + eta + nu (2 A +
nu)``:

* ghost norm of a dense kernel, ``s = sum_{t,s} <x_t, x_s> <g_t, g_s>``:
  each inner product is off by at most ``gamma(d) ||x_t|| ||x_s||`` (any
  summation order) plus ``2.01 d mu``, their product by ``gamma(d_in +
  d_out + 1) X_t X_s G_t G_s`` plus ``4.03 d_in d_out mu`` (every scaled
  entry is below 1), the sum of ``T^2`` terms by ``gamma(T^2)`` more, so
  ``A = sum_t ||x_t|| ||g_t|| + T sqrt((d_in + 1)(d_out + 1)) 2^-59`` (the
  row norms' flushes), ``n = d_in + d_out + T^2 + T + 12``, ``eta = T^2
  (d_in + 1)(d_out + 1) 2^-120`` and ``nu = T sqrt(d_in d_out) (rho_x +
  rho_g) 1.01``; an embedding is the case ``x_t`` one-hot (exact, ``d_in
  = 1``, ``rho_x = 0``);
* a gradient formed per example (a bias, a kernel with ``T^2 > d_in
  d_out``, a local or explicit layer) of ``n`` entries, ``s = sum v'^2``:
  ``A = sqrt(s) + sqrt(n + 1) 2^-60``, ``eta = (n + 1) 2^-120``, ``nu =
  sqrt(n) rho``, ``n + 6`` roundings; beyond ``2^20`` entries (a tied
  embedding's gradient: ``gamma(n)`` has no bound from ``2^23``) ``s`` is
  summed as ``r`` sums of ``c`` squares (trailing axes) and then theirs,
  a barrier between, so ``c + r + 6`` roundings (Higham 2002, Lemma 3.3:
  ``(1 + gamma(c)) (1 + gamma(r)) <= 1 + gamma(c + r)``).

The parts (exponents ``e_p``) are brought to the example's largest ``K``
with weights ``2^(2 (e_p - K))`` (held at ``2^-126`` or more: an upper
bound), and ``N'^2 = (sum_p w_p S_p + 16 P mu) (1 + gamma(P + 16))`` over
the ``P`` parts (nonnegative terms: their additions and roundings), ``N' =
sqrt(N'^2) (1 + 2^-16)``, ``N = 2^K N'``; ``A~ = 2^K A~'`` alike from
``(A + nu)^2``. A layer inside a stack of ``L`` layers (a decoder's
``nn.scan``: one ``[L, ...]`` leaf) is a part of its own, scaled by its own
exponent, so ``P`` counts every layer of every stack; the layers hold
disjoint coordinates of the leaf, like the parts.

**A bound on the float error of the sum.** A sum ``fl(sum_i c_i x_i
y_i^T)`` over ``L`` terms (a batch times positions), with ``c_i`` applied
in float, is off by at most ``gamma(L + 1) sum_i c_i |x_i| |y_i|^T``
entrywise, whose Frobenius norm is at most ``gamma(L + 1) sum_b c_b A_b``
(rank-one terms), plus the flushes: with ``|x|, |c g| < 2^64`` each
product and addition of a dense kernel's sum loses at most ``2^-59.8``, of
a sum of formed gradients or an embedding's scatter ``3 mu``; so ``F``, the
sum over parts of ``sqrt(entries) L 2^-59`` (dense) or ``sqrt(entries) L
2^-123`` (others), bounds them (``2^-39 C`` or less for any model of a
billion parameters and a million terms at ``C >= 1e-3``). Over the parts
(disjoint coordinates), by Minkowski's inequality, the error is at most
``gamma(L_max + 1) sum_b c_b A~_b + F``. The factor also caps ``c_b A~_b
<= kappa C`` with ``kappa = sqrt(T_max)`` (``T_max`` the most positions a
ghost norm sums over; 1 for a model without sequences, where ``A~_b`` is
``||v_b||`` up to rounding and the cap never binds), so a batch of ``B``
rows is off by at most ``E = gamma(L_max + 1) B kappa C + F`` whatever
its contents. The cap clips an example harder only when its positions'
contributions cancel (``||v_b|| < A~_b / kappa``).

**The factor** ``c_b = min(1, C / N_b, kappa C / A~_b) (1 - 2^-16)``
(the margin covers the division), computed as ``min(1, q 2^-K)`` with ``q
= C / max(N', A~' / kappa)`` and exact power-of-two steps; 0 for a padded
or refused row and wherever it would fall below the normal range (a
rounded subnormal could exceed the true quotient): so ``||c_b v_b|| <= C``
exactly. Sums are formed at ``Precision.HIGHEST`` (float32 products on the
CPU and the GPU, never TF32 or bfloat16) and kept in float32 (a bfloat16
model's sum is not rounded to bfloat16).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from zoprivacy.first_order.power_scaling import (
  Scaled,
  per_row,
  pow2,
  scale,
  unscale_at_most_one,
)

U = 2.0**-24
MU = 2.0**-125  # one flushed result or input: twice the least normal
MARGIN = 2.0**-16
FACTOR_LIMIT = 64  # |x|, |g| of a dense kernel's sum stay below 2^64
VALUE_LIMIT = 126  # a gradient formed per example stays below 2^126
WHOLE = 2**20  # a formed gradient of more entries is summed in two stages
PLATFORMS = ("cpu", "gpu", "cuda", "rocm")


def gamma(n: int) -> float:
  """``n u / (1 - n u)``: the relative error of ``n`` float32 roundings."""
  if n * U >= 0.5:
    raise ValueError(f"No float32 error bound for {n} operations.")
  return n * U / (1.0 - n * U)


class Part(NamedTuple):
  """One part of a layer's per-example gradient, in its scaled units (the
  gradient is ``2^exponent`` times them): computed squared norms ``sq
  [B]``, absolute sizes ``absolute [B]``, the count ``terms`` of its norm's
  error bound, how many terms its sum adds per example (``positions``: 1
  for a gradient formed per example), the scaling's ``shift [B]`` (``nu``)
  and flush allowance ``floor`` (``eta``), ``ok [B]`` and ``sum_floor``:
  the flushes' bound on its share of the clipped sum (module docstring).
  A layer group inside a stack of ``L`` layers is ``L`` parts in one: its
  arrays are ``[B, L]`` (each layer scaled by its own exponent) and its
  ``sum_floor`` is the layers' together."""

  sq: jax.Array
  absolute: jax.Array
  terms: int
  positions: int
  exponent: jax.Array
  shift: jax.Array
  floor: float
  ok: jax.Array
  sum_floor: float


class SumBound(NamedTuple):
  """What bounds the float error of the clipped sum: ``rows`` (the
  physical batch), ``length`` (the longest sum, in terms), ``ratio``
  (``kappa``) and ``floor`` (``F``, the flushes)."""

  rows: int
  length: int
  ratio: float
  floor: float = 0.0

  def error(self, clip: float) -> float:
    """``E = gamma(length + 1) rows kappa C + F``."""
    relative = gamma(self.length + 1) * self.rows * self.ratio * float(clip)
    return relative + self.floor

  def over_chunks(self, chunks: int, entries: int) -> SumBound:
    """The bound of ``chunks`` float32 sums each bounded by this one (the
    physical chunks of a batch) added one after another from zero. Each is
    off by ``gamma(L + 1) A_c`` entrywise plus flushes (``A_c = sum_c c_i
    |x_i| |y_i|^T``); the ``n - 1`` additions by ``gamma(n - 1) sum_c
    |S~_c|`` plus ``mu`` each (Higham 2002, eq. (4.4)); ``gamma(L + 1) +
    gamma(n - 1) (1 + gamma(L + 1)) <= gamma(L + n)`` (Lemma 3.3): one sum
    of ``L + n - 1`` terms over the ``n rows`` rows, floors ``(1 +
    gamma(n)) (n F + (n - 1) sqrt(entries) mu)``."""
    if chunks == 1:
      return self
    flushes = chunks * self.floor + (chunks - 1) * math.sqrt(entries) * MU
    return SumBound(
      self.rows * chunks,
      self.length + chunks - 1,
      self.ratio,
      (1.0 + gamma(chunks)) * flushes,
    )


def _sum_of_squares(values):
  """``(sum v^2 [B], m)``, ``m`` the roundings in each sum: ``n`` for
  ``n`` entries, or ``c + r`` where a gradient of more than ``WHOLE``
  entries is summed over its trailing axes first (``c`` entries) and then
  over those ``r`` partial sums, with an optimization barrier between
  (XLA may not merge the two reductions into one of any order)."""
  rows, shape = values.shape[0], values.shape[1:]
  size = math.prod(shape)
  squares = jnp.square(values)
  if size <= WHOLE or len(shape) < 2:
    return jnp.sum(squares.reshape(rows, -1), axis=1), size
  split = min(
    range(1, len(shape)),
    key=lambda k: math.prod(shape[:k]) + math.prod(shape[k:]),
  )
  lead, trail = math.prod(shape[:split]), math.prod(shape[split:])
  partial = jnp.sum(squares.reshape(rows, lead, trail), axis=2)
  partial = jax.lax.optimization_barrier(partial)
  return jnp.sum(partial, axis=1), lead + trail


def object_part(per_example) -> Part:
  """A gradient formed per example (``[B, ...]``)."""
  rows = per_example.shape[0]
  size = math.prod(per_example.shape[1:])
  scaled = scale(per_example, VALUE_LIMIT)
  sq, roundings = _sum_of_squares(scaled.values)
  absolute = jnp.sqrt(jnp.maximum(sq, 0.0)) + math.sqrt(size + 1) * 2.0**-60
  return Part(
    sq,
    absolute,
    roundings + 6,
    1,
    scaled.exponent,
    math.sqrt(size) * scaled.rho,
    (size + 1) * 2.0**-120,
    scaled.ok,
    math.sqrt(size) * rows * 2.0**-123,
  )


def row_norms(x):
  """``||x_t||`` over the last axis (``[B, T, d] -> [B, T]``)."""
  return jnp.sqrt(jnp.sum(jnp.square(x), axis=-1))


def ghost_part(sq, x: Scaled, g: Scaled, *, table: int | None = None) -> Part:
  """A ghost norm ``sq [B]`` (scaled units) over ``T`` positions of scaled
  inputs ``x [B, T, d_in]`` and output gradients ``g [B, T, d_out]``; an
  embedding (``x`` :func:`one_hot`) names its ``table`` rows (its sum is a
  scatter)."""
  rows, positions, d_out = g.values.shape
  d_in = x.values.shape[-1]
  both = (d_in + 1) * (d_out + 1)
  absolute = jnp.sum(row_norms(x.values) * row_norms(g.values), axis=1)
  absolute = absolute + positions * math.sqrt(both) * 2.0**-59
  shift = positions * math.sqrt(d_in * d_out) * (x.rho + g.rho) * 1.01
  length = rows * positions
  if table is None:
    sum_floor = math.sqrt(d_in * d_out) * length * 2.0**-59
  else:
    sum_floor = math.sqrt(min(table, length) * d_out) * length * 2.0**-123
  return Part(
    sq,
    absolute,
    d_in + d_out + positions * positions + positions + 12,
    positions,
    x.exponent + g.exponent,
    shift,
    positions * positions * both * 2.0**-120,
    x.ok & g.ok,
    sum_floor,
  )


def _bound(absolute, terms: int):
  return absolute * jnp.float32(1.0 + gamma(terms))


class Sizes(NamedTuple):
  """Per example, in units of ``2^exponent``: the certified ``norm`` and
  the bound ``absolute`` of the absolute size; ``ratio`` (``kappa``) and
  ``ok`` (every part finite and in range)."""

  norm: jax.Array
  absolute: jax.Array
  exponent: jax.Array
  ratio: float
  ok: jax.Array


def _layers(part: Part) -> int:
  """How many parts ``part`` stands for: ``L`` for a group inside a stack
  of ``L`` layers (its arrays ``[B, L]``, a part per layer), else 1."""
  return part.sq.shape[1] if part.sq.ndim == 2 else 1


def _per_example(reduce, x):
  """``[B]``: ``reduce`` over a layer axis, if ``x`` has one."""
  return reduce(x, axis=1) if x.ndim == 2 else x


def _weights(parts):
  """``(K [B], [w_p])``: the largest exponent and each part's weight
  ``2^(2 (e_p - K))`` (at least ``2^-126``, an upper bound; ``[B, L]``
  for a part with a layer axis)."""
  top = _per_example(jnp.max, parts[0].exponent)
  for p in parts[1:]:
    top = jnp.maximum(top, _per_example(jnp.max, p.exponent))
  return top, [pow2(2 * (p.exponent - per_row(top, p.exponent))) for p in parts]


def certified_sizes(parts) -> Sizes:
  """The certified norms, the bounds of the absolute sizes and the cap
  ratio (module docstring), in scaled units."""
  top, weights = _weights(parts)
  count = sum(_layers(p) for p in parts)  # a layer of a stack: one part
  spread = jnp.float32(1.0 + gamma(count + 16))
  flush = jnp.float32(16 * count * MU)
  sq, total = flush, flush
  for p, w in zip(parts, weights):
    a = _bound(p.absolute, p.terms)
    s = jnp.maximum(p.sq, 0.0) + jnp.float32(gamma(p.terms)) * a * a
    s = s + jnp.float32(p.floor) + p.shift * (2.0 * a + p.shift)
    sq = sq + _per_example(jnp.sum, w * s)
    total = total + _per_example(jnp.sum, w * jnp.square(a + p.shift))
  norm = jnp.sqrt(sq * spread) * jnp.float32(1.0 + MARGIN)
  absolute = jnp.sqrt(total * spread) * jnp.float32(1.0 + MARGIN)
  ok = jnp.isfinite(norm) & jnp.isfinite(absolute)
  for p in parts:
    ok = ok & _per_example(jnp.all, p.ok)
  ratio = math.sqrt(max(p.positions for p in parts))
  return Sizes(norm, absolute, top, ratio, ok)


def certified_factor(parts, clip: float, keep, rows: int):
  """``(c [B], SumBound)``: the clip factors of the module docstring and
  the bound of the sum's float error; ``keep``: rows that count."""
  sizes = certified_sizes(parts)
  size = jnp.maximum(sizes.norm, sizes.absolute / jnp.float32(sizes.ratio))
  factor = unscale_at_most_one(clip / size, sizes.exponent)
  factor = jnp.where(keep & sizes.ok, factor * (1.0 - MARGIN), 0.0)
  length = max(p.positions for p in parts) * int(rows)
  floor = sum(p.sum_floor for p in parts)
  return factor, SumBound(int(rows), length, sizes.ratio, floor)


def estimated_factor(parts, clip: float, keep):
  """``(c [B], norms [B])`` without a certificate (the float noise path):
  ``min(1, C / ||v||)`` from the parts' computed norms, scaled as above;
  the norms in float32 (infinite beyond its range, NaN where not
  finite)."""
  top, weights = _weights(parts)
  sq = sum(
    _per_example(jnp.sum, w * jnp.maximum(p.sq, 0.0))
    for p, w in zip(parts, weights)
  )
  scaled = jnp.sqrt(sq)  # NaN where a part is (maximum keeps NaN)
  half = jnp.floor_divide(top, 2)
  norms = scaled * pow2(half) * pow2(top - half)
  ok = keep & jnp.isfinite(scaled)
  for p in parts:
    ok = ok & _per_example(jnp.all, p.ok)
  q = clip / jnp.maximum(scaled, jnp.float32(2.0**-60))
  return jnp.where(ok, unscale_at_most_one(q, top), 0.0), norms


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
