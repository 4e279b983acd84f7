"""Exact i.i.d. discrete Gaussian noise for a whole vector, vectorized.

The samplers of :mod:`zoprivacy.privacy.discrete_noise` draw one value per
Python call (about 5 us each): too slow for the ``d`` coordinates of a
gradient. This module runs the same algorithms of Canonne, Kamath & Steinke
(2020) on whole ``int64`` numpy arrays, each rejection loop re-run only on
the entries it has not yet decided:

* Alg. 1, ``Bernoulli(exp(-n/m))`` for integers ``n >= 0``, ``m >= 1``:
  ``floor(n/m)`` independent ``Bernoulli(exp(-1))`` (all must succeed), then
  for ``g = (n mod m)/m in [0, 1)``: ``K = 1``, ``K += 1`` while
  ``Bernoulli(g/K)``, accept iff ``K`` is odd;
* Alg. 2, the discrete Laplace of integer scale ``t``: ``U`` uniform in
  ``{0..t-1}``, kept with probability ``exp(-U/t)``, ``V`` geometric
  (``Bernoulli(exp(-1))`` successes), ``X = U + tV``, a sign bit, ``-0``
  rejected;
* Alg. 3, the discrete Gaussian of integer ``sigma``, with the proposal's
  scale ``t = sigma`` (any integer ``t`` is valid; this one keeps every
  intermediate an integer): accept a discrete Laplace ``Y`` with
  probability ``exp(-(|Y| - sigma)^2 / (2 sigma^2))``.

Every probability is a ratio of integers decided by an exactly uniform
integer (rejection sampling on the top bits of 64-bit words), so given
uniform words the output follows the discrete Gaussian exactly. With
``sigma <= 2**24`` and ``|Y| < 2**31`` every intermediate fits ``int64``
(``(|Y| - sigma)^2 < 2**62``, ``2 sigma^2 K < 2**53``); a proposal with
``|Y| >= 2**31`` (probability below ``exp(-128)`` each) is refused with an
error, never approximated.

The words come from Philox-4x64 keyed by BLAKE2b of the step's secret
noise key (:func:`zoprivacy.privacy.randomness.secret_from_key_data`): the
noise is a pure function of ``(secret, plan fingerprint, step)``, because
the estimator folds the fingerprint and the step into that key, and is the
same on every host that holds the key.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os

import numpy as np

from zoprivacy.privacy import randomness

MAX_SIGMA = 2**24
_MAX_PROPOSAL = 2**31
_PURPOSE = b"zoprivacy vector discrete gaussian"


class WordSource:
  """Uniform 64-bit words: Philox-4x64 with a 128-bit key."""

  def __init__(self, key: bytes):
    if len(key) != 16:
      raise ValueError("A word source needs a 16-byte key.")
    self._gen = np.random.Philox(key=np.frombuffer(key, np.uint64))
    self.words_used = 0

  def words(self, n: int) -> np.ndarray:
    self.words_used += int(n)
    return self._gen.random_raw(int(n)).astype(np.uint64)


def words_for_keys(key_words, *counters: int) -> WordSource:
  """The word source of one or several step keys (``uint32[..., 4]``).

  One key: a pure function of that key. Several keys (a vmapped audit):
  one stream keyed by all of them; each row is still an independent exact
  draw, but depends on the whole batch.
  """
  data = np.ascontiguousarray(np.asarray(key_words, np.uint32)).tobytes()
  secret = randomness.secret_from_key_data(
    np.frombuffer(hashlib.sha256(data).digest(), np.uint32)
    if np.asarray(key_words).ndim > 1
    else key_words
  )
  tag = b"".join(int(c).to_bytes(8, "little", signed=True) for c in counters)
  key = hashlib.blake2b(_PURPOSE + tag, key=secret, digest_size=16).digest()
  return WordSource(key)


def _below(src: WordSource, m) -> np.ndarray:
  """Exactly uniform integers in ``[0, m)`` (``m >= 1``, ``m < 2**53``): the
  top ``bit_length(m - 1)`` bits of a word, rejected until below ``m``."""
  m = np.asarray(m, np.int64)
  if m.ndim == 0 or np.all(m == m.flat[0]):  # one bound: scalar shifts
    return _below_const(src, int(m.flat[0]), m.size)
  bits = np.frexp((m - 1).astype(np.float64))[1].astype(np.uint64)
  out = np.zeros(m.shape, np.int64)
  todo = np.flatnonzero(bits > 0)
  while todo.size:
    r = (src.words(todo.size) >> (64 - bits[todo])).astype(np.int64)
    ok = r < m[todo]
    out[todo[ok]] = r[ok]
    todo = todo[~ok]
  return out


def _below_const(src: WordSource, m: int, n: int) -> np.ndarray:
  """``n`` exactly uniform integers in ``[0, m)``."""
  k = (m - 1).bit_length()
  out = np.zeros(n, np.int64)
  if k == 0:
    return out
  shift = np.uint64(64 - k)
  r = (src.words(n) >> shift).astype(np.int64)
  todo = np.flatnonzero(r >= m)
  out[:] = r
  while todo.size:
    r = (src.words(todo.size) >> shift).astype(np.int64)
    ok = r < m
    out[todo[ok]] = r[ok]
    todo = todo[~ok]
  return out


def _bern_exp_fraction(src, num, den) -> np.ndarray:
  """``Bernoulli(exp(-num/den))`` for ``0 <= num <= den`` (Alg. 1)."""
  k = np.ones(num.shape, np.int64)
  active = np.arange(num.size)
  while active.size:
    a = _below(src, den[active] * k[active]) < num[active]
    active = active[a]
    k[active] += 1
  return k % 2 == 1


def bernoulli_exp(src, num, den) -> np.ndarray:
  """``Bernoulli(exp(-num/den))`` for integer arrays ``num >= 0``, ``den >= 1``."""
  num, den = np.asarray(num, np.int64), np.asarray(den, np.int64)
  out = np.ones(num.shape, bool)
  whole = num // den
  alive = np.flatnonzero(whole > 0)
  left = whole[alive]
  while alive.size:  # floor(num/den) Bernoulli(exp(-1)), all must succeed
    ok = _bern_exp_one(src, alive.size)
    out[alive[~ok]] = False
    left = left - 1
    keep = ok & (left > 0)
    alive, left = alive[keep], left[keep]
  rest = np.flatnonzero(out)
  frac = (num - whole * den)[rest]
  out[rest] = _bern_exp_fraction(src, frac, den[rest])
  return out


def _bern_exp_one(src, n: int) -> np.ndarray:
  """``n`` Bernoulli(exp(-1)): Alg. 1 at ``gamma = 1``, whose first trial
  ``Bernoulli(1)`` always succeeds; then ``K += 1`` while ``Bernoulli(1/K)``."""
  k = np.full(n, 2, np.int64)
  active = np.arange(n)
  kk = 2
  while active.size:
    active = active[_below_const(src, kk, active.size) == 0]
    kk += 1
    k[active] = kk
  return k % 2 == 1


def _geometric(src, n: int) -> np.ndarray:
  """Number of ``Bernoulli(exp(-1))`` successes before the first failure."""
  v = np.zeros(n, np.int64)
  alive = np.arange(n)
  while alive.size:
    alive = alive[_bern_exp_one(src, alive.size)]
    v[alive] += 1
  return v


def discrete_laplace(src, t: int, n: int) -> np.ndarray:
  """``n`` i.i.d. discrete Laplace of integer scale ``t`` (Alg. 2)."""
  out = np.zeros(n, np.int64)
  todo = np.arange(n)
  while todo.size:
    tt = np.full(todo.size, t, np.int64)
    u = _below(src, tt)
    kept = np.flatnonzero(bernoulli_exp(src, u, tt))
    x = u[kept] + t * _geometric(src, kept.size)
    negative = (src.words(kept.size) >> np.uint64(63)) == 1
    good = ~(negative & (x == 0))
    done = todo[kept[good]]
    out[done] = np.where(negative, -x, x)[good]
    rest = np.ones(todo.size, bool)
    rest[kept[good]] = False
    todo = todo[rest]
  return out


def discrete_gaussian(src, sigma: int, n: int) -> np.ndarray:
  """``n`` i.i.d. discrete Gaussians of integer ``sigma`` (Alg. 3, ``t =
  sigma``): ``P(x) proportional to exp(-x^2 / (2 sigma^2))`` on the integers."""
  sigma = check_sigma(sigma)
  out = np.zeros(n, np.int64)
  todo = np.arange(n)
  den = 2 * sigma * sigma
  while todo.size:
    y = discrete_laplace(src, sigma, todo.size)
    if np.any(np.abs(y) >= _MAX_PROPOSAL):
      raise RuntimeError(
        "A discrete Laplace proposal reached 2**31 (probability below "
        "exp(-128)); refusing rather than approximating. Draw again."
      )
    a = np.abs(y) - sigma
    ok = bernoulli_exp(src, a * a, np.full(todo.size, den, np.int64))
    out[todo[ok]] = y[ok]
    todo = todo[~ok]
  return out


def check_sigma(sigma) -> int:
  """``sigma`` as an ``int`` in ``[1, MAX_SIGMA]``, or a ``ValueError``."""
  if isinstance(sigma, bool) or int(sigma) != sigma or not 1 <= sigma:
    raise ValueError(f"sigma must be a positive integer, got {sigma!r}.")
  if sigma > MAX_SIGMA:
    raise ValueError(
      f"sigma {sigma} exceeds {MAX_SIGMA}: the int64 sampler's bound."
    )
  return int(sigma)


CHUNK = 2**18  # coordinates per independent sub-stream (one thread each)


def draw(key_words, sigma: int, size: int, step_tag: int = 0) -> np.ndarray:
  """``int32[size]`` exact discrete Gaussian noise for one step key.

  ``key_words``: the step's noise key data (``uint32[4]``, or
  ``uint32[N, 4]`` for ``N`` vmapped keys, then ``int32[N, size]``). The
  coordinates are cut into chunks of :data:`CHUNK`, each drawn from its own
  word source (keyed by the chunk's index) on a thread pool: the result
  does not depend on the number of threads. Refuses (``RuntimeError``) a
  draw beyond ``2**30``, the bound of the overflow-free integer release
  (:func:`zoprivacy.discrete_mechanism.exact_release`), which has
  probability below ``exp(-2**11)`` for ``sigma <= 2**24``.
  """
  key_words = np.asarray(key_words, np.uint32)
  rows = int(np.prod(key_words.shape[:-1], dtype=np.int64))
  total = rows * int(size)
  starts = range(0, total, CHUNK)

  def chunk(start):
    src = words_for_keys(key_words, sigma, size, step_tag, start // CHUNK)
    return discrete_gaussian(src, sigma, min(CHUNK, total - start))

  if len(starts) > 1:
    workers = min(len(starts), os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
      parts = list(pool.map(chunk, starts))
  else:
    parts = [chunk(0)] if total else [np.zeros(0, np.int64)]
  noise = np.concatenate(parts)
  if np.any(np.abs(noise) > 2**30):
    raise RuntimeError("Discrete Gaussian draw beyond 2**30; refusing.")
  return noise.astype(np.int32).reshape(key_words.shape[:-1] + (int(size),))
