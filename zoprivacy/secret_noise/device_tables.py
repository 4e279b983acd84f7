"""The device sampler's tables and its failure bound, built on the host.

For an integer sigma the sampler of
:mod:`zoprivacy.secret_noise.device_discrete_gaussian` proposes ``|y|`` in
buckets ``[j w, (j + 1) w)`` of a power-of-two width ``w`` (between
``sigma / 128`` and ``sigma / 64``; 1 below ``sigma = 128``), ``j < J``
with ``J w >= 14.5 sigma``. The bucket comes from a Walker alias table of
``2^11`` slots with 9-bit thresholds built from integer weights
``c_j = ceil(lambda psi_j)``, ``psi_j = exp(-(j w)^2 / (2 sigma^2))``, so
its probabilities are exactly ``c_j / 2^20`` (the remainder, if any, is a
"reject" symbol); the offset is uniform on ``[0, w)``, the sign a fair bit
(``-0`` rejected, except for ``w = 1``, where bucket 0 is the point 0 and
its weight is ``psi_0 / 2`` instead, each sign giving 0). A proposal ``y`` is accepted with probability
``alpha(y) = rho_j exp(-u (2 j w + u) / (2 sigma^2))`` (``u`` the offset),
``rho_j = lambda' psi_j / c_j <= 1`` with ``lambda' = 1 / max_j psi_j /
c_j``; the accepted values then have probability proportional to
``lambda' exp(-y^2 / (2 sigma^2)) / 2^21 w``: the discrete Gaussian
restricted to ``|y| < J w``.

Everything here is computed once per sigma (cached): the packed alias
table, ``rho_j`` as float32 (scaled by ``2^64``, so that the smallest,
near ``2^-139``, stays a normal number) and as certified 160-bit bounds,
the 160-bit bounds of ``exp(-2^i / (2 sigma^2))`` (Python's ``decimal`` at
60 digits, whose ``exp`` is correctly rounded, then widened by one unit),
and the probabilities that bound the sampler's failure
(:func:`pool_sizes`).
"""

from __future__ import annotations

import decimal
import functools
import math
from typing import NamedTuple

import numpy as np

from zoprivacy.secret_noise import multiword

SLOT_BITS = 11
THRESHOLD_BITS = 9
TAIL = 14.5  # the buckets cover |y| < J w with J w >= TAIL sigma
UNIFORM_BITS = 24  # the acceptance test's first uniform bits
WINDOW = 2.0**-18  # relative width of the float test's undecided band
POOL_FAILURE = 2.0**-128  # each pool's overflow probability, at most
MAX_SIGMA = 2**24
MAX_CANDIDATES = 2**31 - 2**20
RHO_SCALE = 2.0**64
DRAW_FAILURE = 2.0**-112  # the stated bound of one draw (any size)
_DIGITS = 60


class Tables(NamedTuple):
  sigma: int
  width_bits: int  # w = 2^width_bits
  buckets: int  # J
  packed: np.ndarray  # int32[2^11]: threshold | alias << 10
  rho: np.ndarray  # float32[J + 1]: rho_j 2^64 (0 for "reject")
  rho_lower: np.ndarray  # uint32[J + 1, LIMBS]
  rho_upper: np.ndarray  # uint32[J + 1, LIMBS]
  exp_lower: np.ndarray  # uint32[n_bits, LIMBS]: exp(-2^i / (2 sigma^2))
  exp_upper: np.ndarray
  inv_two_var: float  # 1 / (2 sigma^2), rounded to float32
  accept: float  # a lower bound on a candidate's acceptance probability
  truncation: float  # an upper bound on P(|Y| >= J w) for the target


def _dec(x) -> decimal.Decimal:
  return decimal.Decimal(x)


def _bounds(value: decimal.Decimal) -> tuple[np.ndarray, np.ndarray]:
  """160-bit limbs of a lower and an upper bound of ``value`` in ``[0,
  1]``, one unit wider than the rounding (the upper one held below 1; a
  product bound adds the unit back)."""
  scaled = value * (1 << multiword.BITS)
  lo = max(int(scaled.to_integral_value(decimal.ROUND_FLOOR)) - 1, 0)
  hi = int(scaled.to_integral_value(decimal.ROUND_CEILING)) + 1
  hi = min(hi, (1 << multiword.BITS) - 1)
  return multiword.from_int(lo), multiword.from_int(hi)


def _alias(weights: list[int], slots: int, unit: int) -> np.ndarray:
  """Walker's alias table (Vose's construction) in integers: ``weights``
  (one per slot, summing to ``slots * unit``) become ``(threshold,
  alias)`` per slot; slot ``i`` gives ``i`` when a uniform ``t < unit`` is
  below its threshold, else its alias, so symbol ``m`` has probability
  exactly ``weights[m] / (slots * unit)``."""
  if sum(weights) != slots * unit or len(weights) != slots:
    raise ValueError("alias weights must fill the table exactly.")
  left = list(weights)
  small = [i for i, c in enumerate(left) if c < unit]
  large = [i for i, c in enumerate(left) if c >= unit]
  threshold, alias = [unit] * slots, list(range(slots))
  while small and large:
    s, g = small.pop(), large.pop()
    threshold[s], alias[s] = left[s], g
    left[g] -= unit - left[s]
    (small if left[g] < unit else large).append(g)
  return np.asarray(threshold, np.int64) | (np.asarray(alias, np.int64) << 10)


def _weights(psi: np.ndarray, total: int) -> np.ndarray:
  """``c_j = ceil(lambda psi_j)`` for the largest ``lambda`` (bisection)
  with ``sum c_j <= total``."""
  lo, hi = 1.0, float(total) / float(psi.sum()) * 2.0 + 1.0
  for _ in range(200):
    mid = (lo + hi) / 2
    if np.ceil(mid * psi).sum() <= total:
      lo = mid
    else:
      hi = mid
  return np.ceil(lo * psi).astype(np.int64)


@functools.lru_cache(maxsize=32)
def tables(sigma: int) -> Tables:
  """The tables of integer ``sigma`` in ``[1, 2^24]`` (module docstring)."""
  if (
    isinstance(sigma, bool)
    or int(sigma) != sigma
    or not 1 <= sigma <= MAX_SIGMA
  ):
    raise ValueError(f"sigma must be an integer in [1, 2^24], got {sigma!r}.")
  sigma = int(sigma)
  width_bits = max(sigma.bit_length() - 1 - 6, 0)
  w = 1 << width_bits
  buckets = math.ceil(TAIL * sigma / w)
  slots, unit = 1 << SLOT_BITS, 1 << THRESHOLD_BITS
  with decimal.localcontext() as ctx:
    ctx.prec = _DIGITS
    two_var = _dec(2 * sigma * sigma)
    psi_dec = [(-_dec((j * w) ** 2) / two_var).exp() for j in range(buckets)]
    if w == 1:  # bucket 0 is the point 0, proposed under both signs
      psi_dec[0] /= 2
    psi = np.array([float(p) for p in psi_dec])
    c = _weights(psi, slots * unit)
    ratio = [p / _dec(int(cj)) for p, cj in zip(psi_dec, c)]
    lam = 1 / max(ratio)
    rho_dec = [lam * r for r in ratio] + [_dec(0)]
    weights = list(c) + [slots * unit - int(c.sum())]
    weights += [0] * (slots - len(weights))
    bounds = [_bounds(min(r, _dec(1))) for r in rho_dec]
    n_bits = ((w - 1) * (2 * (buckets - 1) * w + w - 1)).bit_length()
    consts = [_bounds((-_dec(1 << i) / two_var).exp()) for i in range(n_bits)]
    accept, truncation = _acceptance(sigma, w, buckets, lam)
  empty = np.zeros((0, multiword.LIMBS), np.uint32)
  return Tables(
    sigma=sigma,
    width_bits=width_bits,
    buckets=buckets,
    packed=_alias(weights, slots, unit).astype(np.int32),
    rho=np.array([float(r) * RHO_SCALE for r in rho_dec], np.float32),
    rho_lower=np.stack([b[0] for b in bounds]),
    rho_upper=np.stack([b[1] for b in bounds]),
    exp_lower=np.stack([b[0] for b in consts]) if consts else empty,
    exp_upper=np.stack([b[1] for b in consts]) if consts else empty,
    inv_two_var=float(np.float32(1.0 / (2.0 * sigma * sigma))),
    accept=accept,
    truncation=truncation,
  )


def _acceptance(sigma, w, buckets, lam) -> tuple[float, float]:
  """A lower bound on the acceptance probability ``lambda' Z_J / 2^21 w``
  (``Z_J = sum_{|y| < J w} exp(-y^2 / 2 sigma^2) >= sigma sqrt(2 pi) -
  tail``, Poisson summation) and an upper bound on the target's mass at
  ``|y| >= J w`` (``2 phi(J w) / (1 - exp(-J w / sigma^2)) / Z``)."""
  edge = _dec(buckets * w)
  two_var = _dec(2 * sigma * sigma)
  tail = 2 * (-(edge * edge) / two_var).exp()
  tail /= 1 - (-edge / _dec(sigma * sigma)).exp()
  z_low = _dec(sigma) * (2 * _dec(math.pi)).sqrt() * (1 - _dec(10) ** -15)
  accept = (
    lam * (z_low - tail) / _dec((1 << (SLOT_BITS + THRESHOLD_BITS + 1)) * w)
  )
  return float(accept) * (1 - 1e-12), float(tail / z_low) * (1 + 1e-12)


def _log_tail(n: int, p: float, a: float) -> float:
  """``-n KL(a/n || p)``: the log of the Chernoff bound on ``P(Bin(n, p)
  >= a)`` for ``a >= n p`` (and on ``P(Bin(n, p) <= a)`` for ``a <= n p``)."""
  q = a / n
  if q <= 0.0:
    return n * math.log1p(-p)
  if q >= 1.0:
    return n * math.log(p)
  kl = q * math.log(q / p) + (1 - q) * math.log((1 - q) / (1 - p))
  return -n * kl


def _at_most(n: int, p: float, target: float) -> int:
  """The least ``k`` with ``P(Bin(n, p) > k) <= target`` by the Chernoff
  bound (``n`` if none is smaller)."""
  log_target = math.log(target)
  lo, hi = int(n * p), n
  while lo < hi:
    k = (lo + hi) // 2
    if k + 1 > n or _log_tail(n, p, k + 1) * (1 - 1e-9) <= log_target:
      hi = k
    else:
      lo = k + 1
  return lo


def _enough(p: float, need: int, target: float) -> int:
  """The least ``s`` with ``P(Bin(s, p) < need) <= target``."""
  if need == 0:
    return 0
  log_target = math.log(target)
  s = int(need / p) + 1
  while _log_tail(s, p, need - 1) * (1 - 1e-9) > log_target:
    s += max(int(0.01 * s), 1)
  return s


class Pools(NamedTuple):
  spares: int  # S: spare candidates for rejected lanes
  rejected: int  # R: rejected lanes replaced at most
  undecided: int  # A: candidates sent to the exact test at most
  failure: float  # an upper bound on P(the draw is not exact)


def ambiguity(tab: Tables) -> float:
  """An upper bound on the probability that the float test leaves a
  candidate undecided: ``2^-24 + 2 WINDOW (1 + WINDOW)`` (``alpha <= 1``)."""
  del tab
  return 2.0**-UNIFORM_BITS + 2 * WINDOW * (1 + WINDOW)


@functools.lru_cache(maxsize=64)
def pool_sizes(sigma: int, size: int) -> Pools:
  """Pool sizes of a draw of ``size`` coordinates and its failure bound:
  each pool overflows with probability at most ``POOL_FAILURE``; the
  exact test leaves a candidate open with probability at most the width
  of its bounds plus one unit, ``(4 n_bits + 8) 2^-160`` (every bound of a
  constant is one unit off, every product two); the truncation at ``J w``
  costs at most ``size`` times the target's tail. Refuses a draw whose
  bound would exceed :data:`DRAW_FAILURE`."""
  tab = tables(sigma)
  reject = min(1.0 - tab.accept, 1.0)
  rejected = _at_most(size, reject, POOL_FAILURE)
  spares = max(_enough(1.0 - reject, rejected, POOL_FAILURE), 1)
  if size + spares > MAX_CANDIDATES:
    raise ValueError(f"A draw of {size} coordinates is too large for one call.")
  p_amb = ambiguity(tab)
  undecided = max(_at_most(size + spares, p_amb, POOL_FAILURE), 1)
  n_bits = tab.exp_lower.shape[0]
  open_bound = (size + spares) * (4 * n_bits + 8) * 2.0**-160
  failure = 3 * POOL_FAILURE + open_bound + size * tab.truncation
  if failure > DRAW_FAILURE:
    raise ValueError(f"A draw of {size} coordinates is too large for one call.")
  return Pools(spares, rejected, undecided, failure)
