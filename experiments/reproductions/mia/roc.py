"""ROC metrics of a membership attack and their confidence intervals.

* AUC: ``sklearn.metrics.roc_auc_score`` (ties count one half).
* TPR at a target FPR: the largest true-positive rate over the thresholds
  whose false-positive rate is at most the target (Carlini et al. 2022,
  Sec. 4.2, "TPR at low FPR"), read from the full ROC curve.
* Confidence intervals: a stratified percentile bootstrap over canaries
  (members and non-members resampled separately, so each resample keeps the
  realized class sizes), seeded. The Hanley-McNeil (1982) standard error of
  the AUC, eq. (2) with their exponential approximations
  ``Q1 = A / (2 - A)``, ``Q2 = 2 A^2 / (1 + A)``, is given next to it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sklearn import metrics as sk_metrics


def auc(scores, is_member) -> float:
  return float(
    sk_metrics.roc_auc_score(np.asarray(is_member, bool), np.asarray(scores))
  )


def roc_curve(scores, is_member) -> tuple[np.ndarray, np.ndarray]:
  """``(fpr, tpr)`` at every distinct threshold, from (0, 0) to (1, 1)."""
  fpr, tpr, _ = sk_metrics.roc_curve(
    np.asarray(is_member, bool), np.asarray(scores), drop_intermediate=False
  )
  return fpr, tpr


def tpr_at_fpr(scores, is_member, target_fpr: float = 0.01) -> float:
  """Largest TPR over thresholds with ``FPR <= target_fpr``."""
  fpr, tpr = roc_curve(scores, is_member)
  return float(tpr[fpr <= target_fpr + 1e-12].max())


def hanley_mcneil_se(area: float, num_members: int, num_non_members: int):
  """Standard error of an AUC (Hanley and McNeil 1982, eq. (2))."""
  a, n1, n0 = float(area), num_members, num_non_members
  q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
  var = (a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (
    n1 * n0
  )
  return float(np.sqrt(max(var, 0.0)))


@dataclasses.dataclass(frozen=True)
class Interval:
  """A point estimate and its two-sided confidence interval."""

  value: float
  low: float
  high: float

  def contains(self, x: float) -> bool:
    return self.low <= x <= self.high

  def format(self, digits: int = 3) -> str:
    return (
      f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"
    )

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class AttackMetrics:
  """AUC and TPR at ``target_fpr``, with bootstrap intervals."""

  auc: Interval
  tpr_at_fpr: Interval
  auc_hanley_mcneil_se: float
  target_fpr: float

  def to_dict(self) -> dict:
    return {
      "auc": self.auc.to_dict(),
      "tpr_at_fpr": self.tpr_at_fpr.to_dict(),
      "auc_hanley_mcneil_se": self.auc_hanley_mcneil_se,
      "target_fpr": self.target_fpr,
    }


def evaluate(
  scores,
  is_member,
  *,
  target_fpr: float = 0.01,
  num_bootstrap: int = 1000,
  confidence: float = 0.95,
  seed: int = 0,
) -> AttackMetrics:
  """AUC and TPR at ``target_fpr`` with stratified bootstrap intervals."""
  scores = np.asarray(scores, np.float64)
  is_member = np.asarray(is_member, bool)
  members = np.flatnonzero(is_member)
  others = np.flatnonzero(~is_member)
  if not len(members) or not len(others):
    raise ValueError("Need at least one member and one non-member.")
  rng = np.random.default_rng([seed, 3])
  aucs, tprs = [], []
  labels = np.concatenate(
    [np.ones(len(members), bool), np.zeros(len(others), bool)]
  )
  for _ in range(num_bootstrap):
    rows = np.concatenate(
      [
        rng.choice(members, len(members)),
        rng.choice(others, len(others)),
      ]
    )
    aucs.append(auc(scores[rows], labels))
    tprs.append(tpr_at_fpr(scores[rows], labels, target_fpr))
  tail = 100 * (1 - confidence) / 2
  point_auc = auc(scores, is_member)

  def interval(value, samples):
    low, high = np.percentile(samples, [tail, 100 - tail])
    return Interval(float(value), float(low), float(high))

  return AttackMetrics(
    auc=interval(point_auc, aucs),
    tpr_at_fpr=interval(tpr_at_fpr(scores, is_member, target_fpr), tprs),
    auc_hanley_mcneil_se=hanley_mcneil_se(point_auc, len(members), len(others)),
    target_fpr=target_fpr,
  )
