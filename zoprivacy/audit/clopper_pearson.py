"""Clopper-Pearson bounds and the epsilon lower bound of a threshold test.

An ``(eps, delta)``-DP mechanism limits every test that tells two
neighbouring inputs apart: its false-positive rate ``FPR`` (guessing
world 1 in world 0) and false-negative rate ``FNR`` satisfy (Kairouz, Oh,
Viswanath 2015, Thm. 2.1)

    FPR + e^eps FNR >= 1 - delta   and   FNR + e^eps FPR >= 1 - delta,

so (Jagielski, Ullman, Oprea 2020, Sec. 3; Nasr et al. 2021, eq. (1))

    eps >= max(log((1 - delta - FPR) / FNR), log((1 - delta - FNR) / FPR)).

Both right-hand sides decrease in ``FPR`` and ``FNR``, so replacing the
rates by one-sided Clopper-Pearson *upper* confidence bounds gives an
epsilon lower bound that holds with the bounds' joint confidence. Each
rate's bound is taken at level ``1 - (1 - confidence) / 2`` (a union bound
over the two), so the returned epsilon is a lower bound with probability at
least ``confidence`` over the trials.

The test is a threshold on a scalar statistic (guess world 1 when the
score is above ``t``). Picking ``t`` on the same trials that estimate the
rates would overstate the confidence, so :func:`threshold_audit` picks the
threshold (and its side) on one half of the trials and evaluates it on the
other, independent half: the confidence statement concerns one fixed test.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import stats


def clopper_pearson_interval(
  successes: int, trials: int, *, confidence: float = 0.95
) -> tuple[float, float]:
  """Two-sided exact binomial interval (Clopper and Pearson 1934).

  ``[B(a/2; k, n-k+1), B(1-a/2; k+1, n-k)]`` with ``B(.; a, b)`` the Beta
  quantile and ``a = 1 - confidence``; the lower end is 0 at ``k = 0`` and
  the upper end 1 at ``k = n``.
  """
  _check_counts(successes, trials, confidence)
  alpha = 1.0 - confidence
  k, n = successes, trials
  lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
  hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
  return lo, hi


def clopper_pearson_upper(successes, trials, *, confidence: float = 0.95):
  """One-sided upper bound ``B(confidence; k+1, n-k)`` (1 at ``k = n``).

  Vectorized over ``successes`` (an int or an array of counts): with
  probability at least ``confidence`` the true rate is at most this.
  """
  k = np.asarray(successes, dtype=np.float64)
  n = float(trials)
  if not 0.0 < confidence < 1.0:
    raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}.")
  if n < 1 or np.any(k < 0) or np.any(k > n):
    raise ValueError(f"Need 0 <= successes <= trials, trials >= 1, got {n}.")
  full = k >= n
  upper = stats.beta.ppf(confidence, k + 1.0, np.where(full, 1.0, n - k))
  upper = np.where(full, 1.0, upper)
  return float(upper) if upper.ndim == 0 else upper


def clopper_pearson_lower(successes, trials, *, confidence: float = 0.95):
  """One-sided lower bound ``B(1 - confidence; k, n-k+1)`` (0 at ``k = 0``)."""
  k = np.asarray(successes, dtype=np.float64)
  upper_of_failures = clopper_pearson_upper(
    trials - k, trials, confidence=confidence
  )
  lower = 1.0 - np.asarray(upper_of_failures)
  return float(lower) if lower.ndim == 0 else lower


def epsilon_from_error_rates(fpr, fnr, *, delta: float):
  """``max(log((1-delta-FPR)/FNR), log((1-delta-FNR)/FPR), 0)``.

  The epsilon that a test with these error rates certifies at ``delta``
  (the module docstring's inequality). Vectorized; a zero rate with a
  positive numerator gives ``inf``.
  """
  fpr = np.asarray(fpr, dtype=np.float64)
  fnr = np.asarray(fnr, dtype=np.float64)
  with np.errstate(divide="ignore", invalid="ignore"):
    a = np.log(np.maximum(1.0 - delta - fpr, 0.0)) - np.log(fnr)
    b = np.log(np.maximum(1.0 - delta - fnr, 0.0)) - np.log(fpr)
  out = np.nan_to_num(np.maximum(np.maximum(a, b), 0.0), nan=0.0, posinf=np.inf)
  return float(out) if out.ndim == 0 else out


def epsilon_lower_bound(
  *,
  false_positives,
  negatives: int,
  false_negatives,
  positives: int,
  delta: float,
  confidence: float = 0.95,
):
  """Epsilon lower bound from error counts, valid w.p. ``>= confidence``.

  ``false_positives`` of ``negatives`` world-0 trials were guessed world 1,
  ``false_negatives`` of ``positives`` world-1 trials were guessed world 0.
  Each rate is replaced by its Clopper-Pearson upper bound at level
  ``1 - (1 - confidence) / 2`` (union bound) before
  :func:`epsilon_from_error_rates`. Vectorized over the counts.
  """
  level = 1.0 - (1.0 - confidence) / 2.0
  fpr = clopper_pearson_upper(false_positives, negatives, confidence=level)
  fnr = clopper_pearson_upper(false_negatives, positives, confidence=level)
  return epsilon_from_error_rates(fpr, fnr, delta=delta)


class ThresholdAudit(NamedTuple):
  """Result of :func:`threshold_audit`.

  Attributes:
    epsilon_lower_bound: holds with probability ``>= confidence``.
    threshold, side: the test chosen on the selection half: guess world 1
      when ``side * score > side * threshold`` (``side`` is +1 or -1).
    false_positive_rate, false_negative_rate: point estimates on the
      evaluation half.
    num_evaluation_trials: ``(world 0, world 1)`` trials evaluated.
    confidence, delta: the request.
  """

  epsilon_lower_bound: float
  threshold: float
  side: int
  false_positive_rate: float
  false_negative_rate: float
  num_evaluation_trials: tuple[int, int]
  confidence: float
  delta: float


def _error_counts(scores0, scores1, thresholds, side):
  """False positives / negatives of ``side * score > side * t`` per ``t``."""
  s0 = np.sort(side * np.asarray(scores0, np.float64))
  s1 = np.sort(side * np.asarray(scores1, np.float64))
  t = side * np.asarray(thresholds, np.float64)
  false_pos = s0.size - np.searchsorted(s0, t, side="right")
  false_neg = np.searchsorted(s1, t, side="right")
  return false_pos, false_neg


def threshold_audit(
  scores_world0,
  scores_world1,
  *,
  delta: float,
  confidence: float = 0.95,
  split_seed: int = 0,
  selection_confidence: float = 0.999,
  max_thresholds: int = 4096,
) -> ThresholdAudit:
  """The best threshold test's epsilon lower bound, with honest confidence.

  Each world's trials are shuffled (``split_seed``) and halved. On the
  selection halves, every candidate threshold (up to ``max_thresholds``
  quantiles of the pooled scores) and both sides are scored by the bound
  :func:`epsilon_lower_bound` they would certify on the evaluation halves
  (selection counts rescaled to the evaluation sizes), at the stricter
  ``selection_confidence``, which steers the choice away from far tails
  whose few counts were lucky. The chosen test is then evaluated once on
  the evaluation halves, which gives the returned bound at ``confidence``.
  The trials must be i.i.d. within each world.
  """
  if not 0.0 < delta < 1.0:
    raise ValueError(f"delta must lie in (0, 1), got {delta!r}.")
  (sel0, ev0), (sel1, ev1) = _split_halves(
    scores_world0, scores_world1, split_seed
  )
  threshold, side = _select_threshold(
    (sel0, sel1),
    (ev0.size, ev1.size),
    delta=delta,
    selection_confidence=selection_confidence,
    max_thresholds=max_thresholds,
  )

  fp, fn = _error_counts(ev0, ev1, [threshold], side)
  eps = epsilon_lower_bound(
    false_positives=int(fp[0]),
    negatives=ev0.size,
    false_negatives=int(fn[0]),
    positives=ev1.size,
    delta=delta,
    confidence=confidence,
  )
  return ThresholdAudit(
    epsilon_lower_bound=float(eps),
    threshold=threshold,
    side=side,
    false_positive_rate=int(fp[0]) / ev0.size,
    false_negative_rate=int(fn[0]) / ev1.size,
    num_evaluation_trials=(ev0.size, ev1.size),
    confidence=confidence,
    delta=delta,
  )


def _split_halves(scores_world0, scores_world1, split_seed):
  """Each world's scores shuffled (``split_seed``) and halved: ``((selection0,
  evaluation0), (selection1, evaluation1))``."""
  rng = np.random.default_rng(split_seed)
  halves = []
  for scores in (scores_world0, scores_world1):
    scores = np.asarray(scores, np.float64).reshape(-1)
    if scores.size < 2 or not np.all(np.isfinite(scores)):
      raise ValueError("Need at least 2 finite scores per world.")
    scores = rng.permutation(scores)
    half = scores.size // 2
    halves.append((scores[:half], scores[half:]))
  return halves


def _select_threshold(
  selection, evaluation_sizes, *, delta, selection_confidence, max_thresholds
):
  """The ``(threshold, side)`` whose selection-half counts, rescaled to the
  evaluation sizes, certify the largest bound at ``selection_confidence``
  (candidates: up to ``max_thresholds`` quantiles of the pooled scores)."""
  sel0, sel1 = selection
  ev0_size, ev1_size = evaluation_sizes
  pooled = np.concatenate([sel0, sel1])
  qs = np.linspace(0.0, 1.0, min(max_thresholds, pooled.size))
  candidates = np.unique(np.quantile(pooled, qs))
  best = (-1.0, 0.0, 1)
  for side in (1, -1):
    fp, fn = _error_counts(sel0, sel1, candidates, side)
    eps = epsilon_lower_bound(
      false_positives=np.round(fp * ev0_size / sel0.size),
      negatives=ev0_size,
      false_negatives=np.round(fn * ev1_size / sel1.size),
      positives=ev1_size,
      delta=delta,
      confidence=selection_confidence,
    )
    i = int(np.argmax(eps))
    if eps[i] > best[0]:
      best = (float(eps[i]), float(candidates[i]), side)
  _, threshold, side = best
  return threshold, side


def _check_counts(successes, trials, confidence) -> None:
  if not 0.0 < confidence < 1.0:
    raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}.")
  if not (
    isinstance(trials, (int, np.integer))
    and isinstance(successes, (int, np.integer))
    and 0 <= successes <= trials
    and trials >= 1
  ):
    raise ValueError(
      f"Need integers 0 <= successes <= trials, trials >= 1; got "
      f"{successes!r}, {trials!r}."
    )


def log_ratio_cap(num_trials: int, *, confidence: float = 0.95) -> float:
  """The largest epsilon any threshold test can certify with ``num_trials``
  evaluation trials per world: both errors zero, ``log((1 - B) / B)`` with
  ``B`` the Clopper-Pearson upper bound of 0 errors (ignoring ``delta``)."""
  level = 1.0 - (1.0 - confidence) / 2.0
  bound = clopper_pearson_upper(0, num_trials, confidence=level)
  return math.log((1.0 - bound) / bound)
