"""Exact i.i.d. discrete Gaussian noise for a whole vector, vectorized.

The samplers of :mod:`zoprivacy.secret_noise.discrete_noise` draw one value per
Python call (about 5 us each): too slow for the ``d`` coordinates of a
gradient. This module runs the same algorithms of Canonne, Kamath & Steinke
(2020) on whole ``int64`` numpy arrays: a loop's next round runs only on
the entries it has not yet decided, and a rejection sampler proposes
candidates in batches and keeps the first ``n`` accepted (see
:func:`_first_accepted`):

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
integer (a 64-bit word modulo the bound, the word redrawn in the last,
incomplete period: :func:`_below`), so given
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
_STEP_PURPOSE = b"zoprivacy vector discrete gaussian, keyed step"


class WordSource:
  """Uniform 64-bit words: Philox-4x64 with a 128-bit key."""

  def __init__(self, key: bytes):
    if len(key) != 16:
      raise ValueError("A word source needs a 16-byte key.")
    # The state of Philox(key=key), set directly: the constructor would
    # first read OS entropy for a seed that the key then overrides.
    self._gen = np.random.Philox(0)
    self._gen.state = {
      "bit_generator": "Philox",
      "state": {
        "counter": np.zeros(4, np.uint64),
        "key": np.frombuffer(key, np.uint64).copy(),
      },
      "buffer": np.zeros(4, np.uint64),
      "buffer_pos": 4,
      "has_uint32": 0,
      "uinteger": 0,
    }
    self.words_used = 0

  def words(self, n: int) -> np.ndarray:
    self.words_used += int(n)
    return self._gen.random_raw(int(n)).astype(np.uint64, copy=False)


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


def _below(src: WordSource, m, n: int | None = None) -> np.ndarray:
  """Exactly uniform integers in ``[0, m)`` (``1 <= m < 2**63``; an array
  of bounds, or one bound for ``n`` draws): ``r = W mod m`` for a uniform
  64-bit word ``W``, ``W`` redrawn when ``W - r > 2**64 - m`` (the last,
  incomplete period of ``m``, so that every residue has ``floor(2**64 /
  m)`` preimages). A redraw has probability below ``m / 2**64 < 2**-7``
  for the bounds here (``m <= 19! < 2**57``): one pass, nearly always."""
  if n is not None:  # one bound: keep W <= floor(2**64 / m) m - 1
    w = src.words(n)
    r = w % np.uint64(m)
    redo = np.flatnonzero(w > np.uint64((2**64 // int(m)) * int(m) - 1))
  else:
    m = np.asarray(m, np.uint64)
    w = src.words(m.size)
    r = w % m
    redo = np.flatnonzero(w - r + (m - np.uint64(1)) < w - r)  # wraps
  m = np.asarray(m, np.uint64)
  while redo.size:
    mm = m if m.ndim == 0 else m[redo]
    fresh = src.words(redo.size)
    rr = fresh % mm
    r[redo] = rr
    redo = redo[fresh - rr + (mm - np.uint64(1)) < fresh - rr]
  return r.view(np.int64)  # r < m < 2**63


def _uniform(src: WordSource, m: int, n: int) -> np.ndarray:
  """``n`` exactly uniform integers in ``[0, m)`` for one bound ``m``."""
  return _below(src, m, n)


def _bern_exp_fraction(src, num, den) -> np.ndarray:
  """``Bernoulli(exp(-num/den))`` for ``0 <= num <= den`` (Alg. 1): round
  ``K = 1, 2, ..`` runs ``Bernoulli(num / (den K))`` on the entries still
  going (all at the same ``K``); an entry stops at its first failure,
  accepted iff that ``K`` is odd. ``den``: one bound or one per entry."""
  out = np.zeros(num.shape, bool)
  scalar = np.ndim(den) == 0
  index, num_k, den_k = np.arange(num.size), num, den
  k = 1
  while index.size:
    m = den_k * k
    go = _below(src, m, index.size if scalar else None) < num_k
    out[index[~go]] = k % 2 == 1
    index, num_k = index[go], num_k[go]
    den_k = den_k if scalar else den_k[go]
    k += 1
  return out


def bernoulli_exp(src, num, den) -> np.ndarray:
  """``Bernoulli(exp(-num/den))`` for integers ``num >= 0`` (an array) and
  ``den >= 1`` (one, or one per entry)."""
  num = np.asarray(num, np.int64)
  den = np.asarray(den, np.int64)
  if den.ndim and den.size and np.all(den == den.flat[0]):
    den = den.flat[0]  # one bound: scalar arithmetic in every round
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
  out[rest] = _bern_exp_fraction(src, frac, den if den.ndim == 0 else den[rest])
  return out


_RADIX = 19  # 19! < 2**57: the trials Bernoulli(1/2) .. Bernoulli(1/19)
_FACTORIAL = 121_645_100_408_832_000  # 19!


def _bern_exp_one(src, n: int) -> np.ndarray:
  """``n`` Bernoulli(exp(-1)): Alg. 1 at ``gamma = 1``, whose first trial
  ``Bernoulli(1)`` always succeeds; then ``K += 1`` while ``Bernoulli(1/K)``,
  accept iff ``K`` is odd.

  The trials ``K = 2 .. 19`` come from one uniform ``R`` in ``[0, 19!)``:
  its mixed-radix digits ``d_j = floor(R / (j-1)!) mod j`` are independent
  and uniform in ``[0, j)``, and trial ``j`` succeeds iff ``d_j = 0``. All
  of trials ``2 .. k`` succeed iff ``d_2 = .. = d_k = 0``. Only ``R = 0``
  (probability ``1 / 19!``) goes on, one trial a pass, from ``K = 20``."""
  r = _uniform(src, _FACTORIAL, n)
  k = np.full(n, 2, np.int64)
  active = np.arange(n)
  for j in range(2, _RADIX + 1):  # d_j = 0: trial j succeeds, K > j
    ok = r % j == 0
    active, r = active[ok], r[ok] // j
    k[active] = j + 1
    if not active.size:
      break
  kk = _RADIX + 1
  while active.size:
    active = active[_uniform(src, kk, active.size) == 0]
    kk += 1
    k[active] = kk
  return k % 2 == 1


def _geometric(src, n: int) -> np.ndarray:
  """``n`` numbers of ``Bernoulli(exp(-1))`` successes before the first
  failure: one i.i.d. sequence of trials, drawn in batches, cut at its
  failures (the ``i``-th run of successes is the ``i``-th count)."""
  runs, have, carry = [], 0, 0
  while have < n:
    trials = _bern_exp_one(src, int((n - have) * 1.7) + 16)
    fails = np.flatnonzero(~trials)
    if fails.size:
      lengths = np.diff(fails, prepend=-1) - 1
      lengths[0] += carry
      carry = trials.size - 1 - int(fails[-1])
      runs.append(lengths)
      have += lengths.size
    else:
      carry += trials.size
  return np.concatenate(runs)[:n]


def _first_accepted(n: int, rate: float, propose) -> np.ndarray:
  """``n`` draws of a rejection sampler: ``propose(c)`` gives ``c`` i.i.d.
  ``(value, accepted)`` candidates; batches are drawn until ``n`` are
  accepted, and the first ``n`` accepted values are kept, in order. The
  accepted values of an i.i.d. candidate sequence are i.i.d. from the
  target, and when to stop depends on the acceptances only, so this is
  exactly the one-at-a-time loop read in batches (``rate``, a guess of the
  acceptance rate, sizes the batches: it changes the cost, not the law)."""
  parts, have = [], 0
  while have < n:
    values, accepted = propose(int((n - have) / rate * 1.05) + 32)
    parts.append(values[accepted])
    have += parts[-1].size
  return np.concatenate(parts)[:n] if parts else np.zeros(0, np.int64)


def discrete_laplace(src, t: int, n: int) -> np.ndarray:
  """``n`` i.i.d. discrete Laplace of integer scale ``t`` (Alg. 2)."""

  def propose(c):
    u = _uniform(src, t, c)
    kept = bernoulli_exp(src, u, t)
    x = u + t * _geometric_where(src, kept)
    negative = _bits(src, c)
    return np.where(negative, -x, x), kept & ~(negative & (x == 0))

  return _first_accepted(n, 0.63 * (1.0 - 0.32 / t), propose)


def _bits(src, n: int) -> np.ndarray:
  """``n`` independent fair bits: the 64 bits of each uniform word."""
  words = src.words(-(-n // 64))
  return np.unpackbits(words.view(np.uint8))[:n].astype(bool)


def _geometric_where(src, kept) -> np.ndarray:
  """:func:`_geometric` at the ``kept`` entries, zero elsewhere."""
  v = np.zeros(kept.shape, np.int64)
  v[kept] = _geometric(src, int(np.count_nonzero(kept)))
  return v


def discrete_gaussian(src, sigma: int, n: int) -> np.ndarray:
  """``n`` i.i.d. discrete Gaussians of integer ``sigma`` (Alg. 3, ``t =
  sigma``): ``P(x) proportional to exp(-x^2 / (2 sigma^2))`` on the integers."""
  sigma = check_sigma(sigma)
  den = 2 * sigma * sigma

  def propose(c):
    y = discrete_laplace(src, sigma, c)
    if np.any(np.abs(y) >= _MAX_PROPOSAL):
      raise RuntimeError(
        "A discrete Laplace proposal reached 2**31 (probability below "
        "exp(-128)); refusing rather than approximating. Draw again."
      )
    a = np.abs(y) - sigma
    return y, bernoulli_exp(src, a * a, den)

  return _first_accepted(n, 0.7, propose)


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
  (:func:`zoprivacy.mechanisms.discrete.exact_release`), which has
  probability below ``exp(-2**11)`` for ``sigma <= 2**24``.
  """
  key_words = np.asarray(key_words, np.uint32)
  rows = int(np.prod(key_words.shape[:-1], dtype=np.int64))
  noise = _chunked(
    lambda c: words_for_keys(key_words, sigma, size, step_tag, c),
    sigma,
    rows * int(size),
  )
  return noise.reshape(key_words.shape[:-1] + (int(size),))


def draw_step(key_words, sigma: int, size: int, step: int) -> np.ndarray:
  """``int32[size]``: the noise of step ``step`` under a step-independent
  key (``uint32[4]``, already bound to the plan): a pure function of
  ``(key, sigma, size, step)``, wherever and whenever it is drawn (the
  prefetching source, :mod:`zoprivacy.secret_noise.vector_noise_prefetch`, and
  an on-demand draw agree). Chunks and refusals as in :func:`draw`."""
  key_words = np.asarray(key_words, np.uint32).reshape(-1)
  secret = randomness.secret_from_key_data(key_words)

  def source(c):
    tag = b"".join(
      int(x).to_bytes(8, "little", signed=True) for x in (sigma, size, step, c)
    )
    key = hashlib.blake2b(_STEP_PURPOSE + tag, key=secret, digest_size=16)
    return WordSource(key.digest())

  return _chunked(source, sigma, int(size))


def _chunked(source, sigma: int, total: int) -> np.ndarray:
  """``int32[total]``: chunk ``c`` of :data:`CHUNK` coordinates drawn from
  ``source(c)``, chunks on a thread pool (the result does not depend on
  the number of threads)."""
  starts = range(0, total, CHUNK)

  def chunk(start):
    return discrete_gaussian(
      source(start // CHUNK), sigma, min(CHUNK, total - start)
    )

  if len(starts) > 1:
    workers = min(len(starts), os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
      parts = list(pool.map(chunk, starts))
  else:
    parts = [chunk(0)] if total else [np.zeros(0, np.int64)]
  noise = np.concatenate(parts)
  if np.any(np.abs(noise) > 2**30):
    raise RuntimeError("Discrete Gaussian draw beyond 2**30; refusing.")
  return noise.astype(np.int32)
