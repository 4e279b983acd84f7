"""Exact samplers for discrete Laplace and discrete Gaussian noise.

Implements Algorithms 1-3 of Canonne, Kamath and Steinke (2020), "The
Discrete Gaussian for Differential Privacy" (NeurIPS 2020; arXiv:2004.00010):

* Alg. 1, :func:`bernoulli_exp`: Bernoulli(exp(-gamma)) for rational gamma.
* Alg. 2, :func:`sample_discrete_laplace`: ``P[Y = y]`` proportional to
  ``exp(-|y| / t)`` on the integers, t rational.
* Alg. 3, :func:`sample_discrete_gaussian`: P[Y = y] proportional to
  exp(-y^2 / (2 sigma^2)) on the integers, sigma^2 rational.

Every sampler uses integer arithmetic only and draws no floating-point
number: its only source of randomness is ``rng.randbelow(n)``, which must
return an exactly uniform integer in ``[0, n)``. Given such a source the
output distribution is exactly the stated one (no rounding, no truncation).
The float-parameter wrappers convert their argument to the rational it
denotes exactly (``fractions.Fraction(float)``, never ``limit_denominator``),
so ``sigma=0.1`` samples with sigma equal to the binary64 number nearest 0.1.

Cost. Each ``randbelow`` call reads fresh randomness (a hash read for the
keyed CSPRNG), so calls are economised without changing the algorithms'
output distribution: one call (split in mixed radix into independent
uniforms) gives all the randomness of one iteration of Alg. 2 but rare
extras, and the first steps of Alg. 1's Bernoulli chain are read off a
single uniform (see ``_chain_decide``). Measured with a ``random.Random``
source on a shared 2-core CPU: about 5 us and 3.7 ``randbelow`` calls per
discrete Gaussian sample for sigma between 1e2 and 1e5 (the test file prints
the timing when run with ``-s``).
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable
from fractions import Fraction
from typing import Protocol

import numpy as np

# Vector forms return int64: with parameters <= 2**42 an overflow needs a
# sample beyond 2**20 standard deviations.
_MAX_FLOAT_PARAMETER = float(2**42)
# Alg. 1's chain A_1, A_2, ... is read off one uniform draw for its first D
# steps (see _bernoulli_exp_le1); a further draw is needed with probability
# <= 1/D!. Large denominators (non-dyadic parameters) use a shorter prefix.
_DEPTH = 6
_DEPTH_LARGE_DEN = 3
_SMALL_DEN = 2**64
# gamma = 1 (Alg. 2's geometric loop): thresholds D!/k!, k = 0..D.
_E1_THRESHOLDS = tuple(
  math.factorial(_DEPTH) // math.factorial(k) for k in range(_DEPTH + 1)
)
_E1_TOP = _E1_THRESHOLDS[0]


class RandBelow(Protocol):
  """A source of exactly uniform integers (e.g. a keyed CSPRNG stream)."""

  def randbelow(self, n: int) -> int:
    """Returns an exactly uniform integer in ``[0, n)``, for ``n >= 1``."""


def _check_int(x, name: str, minimum: int) -> int:
  if not isinstance(x, numbers.Integral) or isinstance(x, bool):
    raise ValueError(f"{name} must be an integer, got {x!r}.")
  x = int(x)
  if x < minimum:
    raise ValueError(f"{name} must be >= {minimum}, got {x}.")
  return x


def _randbelow_of(rng) -> Callable[[int], int]:
  randbelow = getattr(rng, "randbelow", None)
  if not callable(randbelow):
    raise ValueError(
      "rng must have a method randbelow(n) returning an exactly uniform "
      f"integer in [0, n); got {type(rng).__name__}."
    )
  return randbelow


@functools.lru_cache(maxsize=64)
def _exact_ratio(x, name: str) -> tuple[int, int]:
  """``(num, den)`` with ``num / den == x`` exactly, for a finite ``x > 0``
  (cached: a run draws every step with the same parameter)."""
  if isinstance(x, bool) or not isinstance(x, numbers.Real):
    raise ValueError(f"{name} must be a real number, got {x!r}.")
  if isinstance(x, numbers.Rational):
    frac = Fraction(int(x.numerator), int(x.denominator))
  else:
    value = float(x)  # exact for float16/32/64
    if not math.isfinite(value):
      raise ValueError(f"{name} must be finite, got {x!r}.")
    frac = Fraction(value)
  if frac <= 0:
    raise ValueError(f"{name} must be > 0, got {x!r}.")
  if frac > _MAX_FLOAT_PARAMETER:
    raise ValueError(f"{name} must be <= 2**42 for int64 output, got {x!r}.")
  return frac.numerator, frac.denominator


def _chain_depth(den: int) -> int:
  return _DEPTH if den < _SMALL_DEN else _DEPTH_LARGE_DEN


def _chain_top(den: int, depth: int) -> int:
  return den**depth * math.factorial(depth)


def _chain_decide(
  num: int, den: int, depth: int, top: int, w: int, randbelow
) -> bool:
  """CKS Alg. 1 for ``0 < num/den <= 1`` with its first steps read off ``w``.

  Alg. 1 draws A_k ~ Bernoulli(gamma / k), k = 1, 2, ..., up to the first
  A_k = 0 and returns whether that k is odd: P[k odd] = sum_j (-gamma)^j/j!.
  The events {A_1 = ... = A_k = 1}, of probability gamma^k / k!, are nested,
  so with ``w`` uniform on ``[0, top)``, ``top = den^D D!``, the first D of
  them are {w < num^k den^(D-k) D! / k!} (exact integers). Only when all D
  hold (probability <= 1/D!) does the chain go on with fresh draws, exactly
  as Alg. 1 does.
  """
  threshold = top
  for k in range(1, depth + 1):
    threshold = threshold * num // (den * k)  # num^k den^(D-k) D!/k!
    if w >= threshold:  # A_1 = ... = A_{k-1} = 1 and A_k = 0
      return bool(k & 1)
  k = depth + 1
  while randbelow(den * k) < num:
    k += 1
  return bool(k & 1)


def _e1_decide(w: int, randbelow) -> bool:
  """Bernoulli(exp(-1)) from ``w`` uniform on ``[0, _E1_TOP)`` (CKS Alg. 1)."""
  for k in range(2, _DEPTH + 1):  # A_1 ~ Bernoulli(1) always holds
    if w >= _E1_THRESHOLDS[k]:
      return bool(k & 1)
  k = _DEPTH + 1
  while randbelow(k) == 0:
    k += 1
  return bool(k & 1)


def _bernoulli_exp_le1(num: int, den: int, randbelow) -> bool:
  """Bernoulli(exp(-num/den)) for ``0 <= num <= den``, nearly one draw."""
  if num == 0:
    return True
  if num == den:
    return _e1_decide(randbelow(_E1_TOP), randbelow)
  depth = _chain_depth(den)
  top = _chain_top(den, depth)
  return _chain_decide(num, den, depth, top, randbelow(top), randbelow)


def _bernoulli_exp(num: int, den: int, randbelow) -> bool:
  """Bernoulli(exp(-num/den)) for any ``num >= 0`` (CKS Alg. 1)."""
  if num <= den:
    return _bernoulli_exp_le1(num, den, randbelow)
  whole, rest = divmod(num, den)
  for _ in range(whole):
    if not _bernoulli_exp_le1(1, 1, randbelow):
      return False
  return _bernoulli_exp_le1(rest, den, randbelow)


def bernoulli_exp(gamma_num: int, gamma_den: int, rng: RandBelow) -> bool:
  """Exact Bernoulli(exp(-gamma)) sample for rational ``gamma >= 0``.

  Canonne, Kamath, Steinke (2020), Algorithm 1. For ``gamma <= 1`` it draws
  A_k ~ Bernoulli(gamma / k), k = 1, 2, ..., up to the first zero and returns
  whether the number of draws is odd; for ``gamma > 1`` it returns the AND of
  ``floor(gamma)`` Bernoulli(exp(-1)) samples and one
  Bernoulli(exp(-(gamma - floor(gamma)))) sample. Samples exactly
  Bernoulli(exp(-gamma_num / gamma_den)) given an exactly uniform ``rng``;
  integer arithmetic only, no floating-point number is drawn. Uses
  ``floor(gamma) + 1`` ``randbelow`` calls except with small probability.

  Args:
    gamma_num: numerator of gamma, an integer ``>= 0``.
    gamma_den: denominator of gamma, an integer ``>= 1``.
    rng: object with ``randbelow(n)`` (exactly uniform on ``[0, n)``).

  Returns:
    ``True`` with probability exactly ``exp(-gamma_num / gamma_den)``.

  Raises:
    ValueError: if ``gamma_num < 0``, ``gamma_den < 1``, either is not an
      integer, or ``rng`` has no ``randbelow``.
  """
  num = _check_int(gamma_num, "gamma_num", 0)
  den = _check_int(gamma_den, "gamma_den", 1)
  return _bernoulli_exp(num, den, _randbelow_of(rng))


def _discrete_laplace(t: int, s: int, randbelow) -> int:
  """Discrete Laplace with scale ``t / s`` (CKS Alg. 2), ``t, s >= 1``.

  One ``randbelow`` call per iteration of Alg. 2 (nearly always): it is
  split (mixed radix, so into independent uniforms) into U ~ Uniform{0..t-1}
  with the sign bit B, the uniform deciding D ~ Bernoulli(exp(-U/t)), and
  the uniforms of the first two Bernoulli(exp(-1)) trials of the geometric V.
  Unused parts are discarded, which leaves the used ones uniform.
  """
  depth = _chain_depth(t)
  top = _chain_top(t, depth)
  span = 2 * t * top * _E1_TOP * _E1_TOP
  while True:
    x = randbelow(span)
    x, w_d = divmod(x, top)
    x, w_v1 = divmod(x, _E1_TOP)
    sign_u, w_v2 = divmod(x, _E1_TOP)
    negative = sign_u >= t
    u = sign_u - t if negative else sign_u
    if u and not _chain_decide(u, t, depth, top, w_d, randbelow):
      continue  # D = 0: restart
    v = 0
    if _e1_decide(w_v1, randbelow):
      v = 1
      if _e1_decide(w_v2, randbelow):
        v = 2
        while _e1_decide(randbelow(_E1_TOP), randbelow):
          v += 1
    y = (u + t * v) // s
    if y == 0:
      if negative:
        continue  # B = 1 and Y = 0: restart
      return 0
    return -y if negative else y


def sample_discrete_laplace(
  scale_num: int, scale_den: int, rng: RandBelow
) -> int:
  """Exact discrete Laplace sample with rational scale ``t = num / den``.

  Canonne, Kamath, Steinke (2020), Algorithm 2. Samples exactly
  ``P[Y = y] = (e^{1/t} - 1) / (e^{1/t} + 1) * exp(-|y| / t)`` for every
  integer ``y`` (untruncated), given an exactly uniform ``rng``. Integer
  arithmetic only; no floating-point number is drawn. In dp_accounting's
  terms this is the discrete Laplace with ``parameter = 1 / t``.

  Args:
    scale_num: numerator of the scale ``t``, an integer ``>= 1``.
    scale_den: denominator of the scale ``t``, an integer ``>= 1``.
    rng: object with ``randbelow(n)`` (exactly uniform on ``[0, n)``).

  Returns:
    A Python ``int``.

  Raises:
    ValueError: for non-integer or non-positive ``scale_num``/``scale_den``
      or an ``rng`` without ``randbelow``.
  """
  t = _check_int(scale_num, "scale_num", 1)
  s = _check_int(scale_den, "scale_den", 1)
  return _discrete_laplace(t, s, _randbelow_of(rng))


def _discrete_gaussian(n: int, d: int, randbelow) -> int:
  """Discrete Gaussian with ``sigma^2 = n / d`` (CKS Alg. 3), ``n, d >= 1``.

  Proposes Y from the discrete Laplace with integer scale
  ``t = floor(sigma) + 1`` and accepts it with probability
  ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``. Written over the integers,
  that exponent is ``(|Y| d t - n)^2 / (2 n d t^2)``.
  """
  t = math.isqrt(n // d) + 1  # floor(sqrt(n/d)) == isqrt(floor(n/d))
  dt = d * t
  gamma_den = 2 * n * dt * t
  while True:
    y = _discrete_laplace(t, 1, randbelow)
    a = abs(y) * dt - n
    if _bernoulli_exp(a * a, gamma_den, randbelow):
      return y


def sample_discrete_gaussian(
  sigma_sq_num: int, sigma_sq_den: int, rng: RandBelow
) -> int:
  """Exact discrete Gaussian sample with rational ``sigma^2 = num / den``.

  Canonne, Kamath, Steinke (2020), Algorithm 3 (rejection from the discrete
  Laplace of scale ``floor(sigma) + 1``, using Algs. 1 and 2). Samples
  exactly ``P[Y = y] = exp(-y^2 / (2 sigma^2)) / sum_z exp(-z^2 /
  (2 sigma^2))`` for every integer ``y`` (untruncated), given an exactly
  uniform ``rng``. Integer arithmetic only; no floating-point number is
  drawn. ``sigma`` is the parameter of the distribution; its variance is
  below ``sigma^2`` (shown by CKS 2020), and very close to it for sigma > 1.

  Args:
    sigma_sq_num: numerator of ``sigma^2``, an integer ``>= 1``.
    sigma_sq_den: denominator of ``sigma^2``, an integer ``>= 1``.
    rng: object with ``randbelow(n)`` (exactly uniform on ``[0, n)``).

  Returns:
    A Python ``int``.

  Raises:
    ValueError: for non-integer or non-positive numerator/denominator or an
      ``rng`` without ``randbelow``.
  """
  n = _check_int(sigma_sq_num, "sigma_sq_num", 1)
  d = _check_int(sigma_sq_den, "sigma_sq_den", 1)
  return _discrete_gaussian(n, d, _randbelow_of(rng))


def discrete_gaussian_sample(sigma: float, rng: RandBelow) -> int:
  """One exact discrete Gaussian sample with parameter ``sigma`` (a float).

  Canonne, Kamath, Steinke (2020), Algorithm 3, with ``sigma^2`` the exact
  square of the rational ``Fraction(sigma)``. Samples exactly
  ``P[Y = y]`` proportional to ``exp(-y^2 / (2 sigma^2))`` on the integers;
  draws no floating-point number.

  Raises:
    ValueError: unless ``0 < sigma <= 2**42`` is finite.
  """
  num, den = _exact_ratio(sigma, "sigma")
  return _discrete_gaussian(num * num, den * den, _randbelow_of(rng))


def discrete_laplace_sample(scale: float, rng: RandBelow) -> int:
  """One exact discrete Laplace sample with scale ``scale`` (a float).

  Canonne, Kamath, Steinke (2020), Algorithm 2, with the scale the exact
  rational ``Fraction(scale)``. Samples exactly ``P[Y = y]`` proportional to
  ``exp(-|y| / scale)`` on the integers; draws no floating-point number.

  Raises:
    ValueError: unless ``0 < scale <= 2**42`` is finite.
  """
  num, den = _exact_ratio(scale, "scale")
  return _discrete_laplace(num, den, _randbelow_of(rng))


def discrete_gaussian_noise(
  sigma: float, size: int, rng: RandBelow
) -> np.ndarray:
  """``size`` i.i.d. exact discrete Gaussian samples as an int64 array.

  Canonne, Kamath, Steinke (2020), Algorithm 3. Each entry has exactly
  ``P[Y = y]`` proportional to ``exp(-y^2 / (2 sigma^2))`` on the integers,
  with ``sigma`` converted exactly (``Fraction(sigma)``). No floating-point
  number is drawn; the samples are independent.

  Args:
    sigma: the parameter of the distribution, finite, ``0 < sigma <= 2**42``.
    size: number of samples, an integer ``>= 0``.
    rng: object with ``randbelow(n)`` (exactly uniform on ``[0, n)``).

  Raises:
    ValueError: for an invalid ``sigma``, ``size`` or ``rng``.
  """
  num, den = _exact_ratio(sigma, "sigma")
  size = _check_int(size, "size", 0)
  randbelow = _randbelow_of(rng)
  n, d = num * num, den * den
  return np.array(
    [_discrete_gaussian(n, d, randbelow) for _ in range(size)],
    dtype=np.int64,
  )


def discrete_laplace_noise(
  scale: float, size: int, rng: RandBelow
) -> np.ndarray:
  """``size`` i.i.d. exact discrete Laplace samples as an int64 array.

  Canonne, Kamath, Steinke (2020), Algorithm 2. Each entry has exactly
  ``P[Y = y]`` proportional to ``exp(-|y| / scale)`` on the integers, with
  ``scale`` converted exactly (``Fraction(scale)``). No floating-point
  number is drawn; the samples are independent.

  ``scale`` is the scale ``t``, finite, ``0 < scale <= 2**42``; ``size``,
  ``rng`` and the errors are as in :func:`discrete_gaussian_noise`.
  """
  num, den = _exact_ratio(scale, "scale")
  size = _check_int(size, "size", 0)
  randbelow = _randbelow_of(rng)
  return np.array(
    [_discrete_laplace(num, den, randbelow) for _ in range(size)],
    dtype=np.int64,
  )
