"""The one-run audit of Steinke, Nasr and Jagielski (2023).

"Privacy auditing with one (1) training run": ``m`` canaries are each
included independently with probability 1/2 (``S_i`` in ``{-1, +1}``); after
one run every canary gets a score, the auditor guesses the ``k+`` highest
scored canaries as included (``T_i = +1``), the ``k-`` lowest as excluded
(``T_i = -1``) and abstains on the rest, so ``r = k+ + k-`` guesses are made
and ``v`` of them are correct.

Their Theorem 3.1 (with the delta term of its proof, Sec. 5): if the run is
``(eps, delta)``-DP in each canary, then for every ``v``

    P[W >= v] <= f(v) + 2 m delta max_{i = 1..v} (f(v - i) - f(v)) / i,

with ``W`` the number of correct guesses and ``f(v) = P[Binomial(r, q) >=
v]``, ``q = e^eps / (1 + e^eps)`` (the accuracy of ``eps``-DP randomized
response). The right-hand side is the p-value of observing ``v`` under the
null hypothesis "the run is ``(eps, delta)``-DP"; it increases with
``eps``, so the epsilon lower bound at confidence ``1 - p`` is the largest
``eps`` whose p-value is below ``p``, found by bisection (their Appendix D
searches the same way). ``k+`` and ``k-`` must be fixed before the scores
are seen, for ``r`` to be fixed as the theorem requires.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import stats


def p_value(
  *, num_canaries: int, num_guesses: int, num_correct: int, epsilon, delta
) -> float:
  """``f(v) + 2 m delta max_i (f(v-i) - f(v)) / i``, capped at 1.

  ``f(v) = P[Binomial(r, e^eps / (1 + e^eps)) >= v]`` and ``f(v-i) - f(v)
  = P[v - i <= Binomial < v]``, the sum of the ``i`` pmf terms below ``v``
  (Steinke, Nasr, Jagielski 2023, Thm. 3.1).
  """
  m, r, v = num_canaries, num_guesses, num_correct
  _check(m, r, v, delta)
  if epsilon < 0:
    raise ValueError(f"epsilon must be >= 0, got {epsilon!r}.")
  q = 1.0 / (1.0 + math.exp(-epsilon))
  tail = float(stats.binom.sf(v - 1, r, q))  # P[Binomial >= v]
  if v == 0 or delta == 0:
    return min(tail, 1.0)
  below = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)  # v-1, ..., 0
  spread = np.cumsum(below) / np.arange(1, v + 1)
  return min(tail + 2.0 * m * delta * float(np.max(spread)), 1.0)


def epsilon_lower_bound(
  *,
  num_canaries: int,
  num_guesses: int,
  num_correct: int,
  delta: float,
  confidence: float = 0.95,
  iterations: int = 60,
) -> float:
  """Largest ``eps`` rejected at level ``1 - confidence`` (bisection).

  Keeps ``p_value(eps_lo) < 1 - confidence <= p_value(eps_hi)`` and returns
  ``eps_lo`` (0 when even ``eps = 0`` is not rejected), so the bound errs
  low: with probability at least ``confidence`` it is below the true
  epsilon of the audited run.
  """
  alpha = 1.0 - confidence
  if not 0.0 < alpha < 1.0:
    raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}.")

  def rejected(eps):
    return (
      p_value(
        num_canaries=num_canaries,
        num_guesses=num_guesses,
        num_correct=num_correct,
        epsilon=eps,
        delta=delta,
      )
      < alpha
    )

  if not rejected(0.0):
    return 0.0
  lo, hi = 0.0, 1.0
  while rejected(hi):
    lo, hi = hi, 2.0 * hi
    if hi > 1e4:
      return lo
  for _ in range(iterations):
    mid = 0.5 * (lo + hi)
    if rejected(mid):
      lo = mid
    else:
      hi = mid
  return lo


def guesses_from_scores(scores, *, num_positive: int, num_negative: int):
  """``T``: +1 on the ``k+`` highest scores, -1 on the ``k-`` lowest, else 0
  (ties broken by position, which the caller should randomize)."""
  scores = np.asarray(scores, np.float64).reshape(-1)
  m = scores.size
  if num_positive < 0 or num_negative < 0 or num_positive + num_negative > m:
    raise ValueError(
      f"Need k+, k- >= 0 and k+ + k- <= m = {m}; got {num_positive}, "
      f"{num_negative}."
    )
  order = np.argsort(scores, kind="stable")
  guesses = np.zeros(m, np.int64)
  guesses[order[m - num_positive :]] = 1
  guesses[order[:num_negative]] = -1
  return guesses


class OneRunAudit(NamedTuple):
  """Result of :func:`one_run_audit`: the bound and the counts it used."""

  epsilon_lower_bound: float
  num_canaries: int
  num_guesses: int
  num_correct: int
  delta: float
  confidence: float


def one_run_audit(
  scores,
  included,
  *,
  num_positive: int,
  num_negative: int,
  delta: float,
  confidence: float = 0.95,
) -> OneRunAudit:
  """Guess from ``scores``, count correct guesses against ``included``
  (bool per canary), and bound epsilon (Steinke et al. 2023, Alg. 1)."""
  included = np.asarray(included, bool).reshape(-1)
  guesses = guesses_from_scores(
    scores, num_positive=num_positive, num_negative=num_negative
  )
  if guesses.size != included.size:
    raise ValueError("scores and included need one entry per canary.")
  truth = np.where(included, 1, -1)
  r = int(np.sum(guesses != 0))
  v = int(np.sum(guesses * truth > 0))
  eps = epsilon_lower_bound(
    num_canaries=included.size,
    num_guesses=r,
    num_correct=v,
    delta=delta,
    confidence=confidence,
  )
  return OneRunAudit(eps, included.size, r, v, delta, confidence)


def _check(m, r, v, delta) -> None:
  if not (0 <= v <= r <= m):
    raise ValueError(f"Need 0 <= v <= r <= m, got v={v}, r={r}, m={m}.")
  if not 0.0 <= delta <= 1.0:
    raise ValueError(f"delta must lie in [0, 1], got {delta!r}.")
