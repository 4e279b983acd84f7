"""The table (markdown), the verdicts and the ROC plot of the experiment."""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from experiments.reproductions.mia import roc

SMOKE = "smoke run: no verdict"
EVALUATION_NOTE = (
  "All runs are evaluation runs of an attack experiment: the canaries and "
  "their membership come from the experimenter's fixed seed and per-canary "
  "scores are published. The estimator's noise and batches come from each "
  "run's own secret ({noise})."
)


@dataclasses.dataclass(frozen=True)
class Row:
  """One setting: its run and the metrics of both attacks."""

  label: str
  private: bool
  epsilon: float
  noise_multiplier: float | None
  accuracy: float
  loss_attack: roc.AttackMetrics
  lira: roc.AttackMetrics
  one_run_epsilon: float
  loss_scores: np.ndarray
  lira_scores: np.ndarray

  def to_dict(self) -> dict:
    return {
      "label": self.label,
      "private": self.private,
      "epsilon": self.epsilon,
      "noise_multiplier": self.noise_multiplier,
      "test_accuracy": self.accuracy,
      "loss_attack": self.loss_attack.to_dict(),
      "lira": self.lira.to_dict(),
      "one_run_epsilon_lower_bound": self.one_run_epsilon,
    }


@dataclasses.dataclass(frozen=True)
class Info:
  """What the header of the report says about the experiment."""

  mode: str
  smoke: bool
  setup: str
  num_canaries: int
  num_members: int
  num_references: int
  delta: float
  seconds: float
  command: str
  noise: str


def _eps(row: Row) -> str:
  return f"{row.epsilon:.3g}" if np.isfinite(row.epsilon) else "inf"


def table(rows: list[Row]) -> str:
  fpr = rows[0].loss_attack.target_fpr
  head = (
    "| setting | eps (accountant) | sigma | test acc. | AUC loss [95% CI] "
    "| AUC LiRA [95% CI] | TPR@{p}%FPR loss [95% CI] | TPR@{p}%FPR LiRA "
    "[95% CI] | one-run eps lower bound (LiRA) |".format(p=f"{100 * fpr:g}")
  )
  lines = [head, "|---|---:|---:|---:|---|---|---|---|---:|"]
  for r in rows:
    sigma = "-" if r.noise_multiplier is None else f"{r.noise_multiplier:.3g}"
    lines.append(
      f"| {r.label} | {_eps(r)} | {sigma} | {r.accuracy:.3f} | "
      f"{r.loss_attack.auc.format()} | {r.lira.auc.format()} | "
      f"{r.loss_attack.tpr_at_fpr.format()} | {r.lira.tpr_at_fpr.format()} | "
      f"{r.one_run_epsilon:.3f} |"
    )
  return "\n".join(lines)


def verdicts(rows: list[Row], smoke: bool) -> list[str]:
  """Claims checked on the numbers (none in a smoke run)."""
  if smoke:
    return [SMOKE]
  private = [r for r in rows if r.private]
  public = [r for r in rows if not r.private]
  out = []
  for attack in ("loss_attack", "lira"):
    top = max(getattr(r, attack).auc.high for r in private)
    for r in public:
      m = getattr(r, attack).auc
      verdict = "above" if m.low > top else "NOT clearly above"
      out.append(
        f"{attack}: {r.label} AUC {m.format()} is {verdict} every private "
        f"run's interval (highest private upper bound {top:.3f})."
      )
    inside = [r.label for r in private if getattr(r, attack).auc.contains(0.5)]
    out.append(
      f"{attack}: 0.5 lies in the AUC interval of {len(inside)} of "
      f"{len(private)} private runs ({', '.join(inside) or 'none'})."
    )
  bad = [r.label for r in private if r.one_run_epsilon > r.epsilon]
  out.append(
    "one-run audit: every private run's epsilon lower bound is at most its "
    "accountant's epsilon."
    if not bad
    else f"one-run audit: lower bound ABOVE the accountant for {bad}: a bug."
  )
  return out


def summary(info: Info, rows: list[Row]) -> str:
  fpr = rows[0].loss_attack.target_fpr
  lines = [
    "# Membership inference on inserted canaries (DP-ZO Table 6 analog)",
    "",
    f"Command: `{info.command}` ({info.mode} mode, "
    f"{info.seconds / 60:.1f} min).",
    "",
    info.setup,
    "",
    f"{info.num_canaries} canaries, {info.num_members} inserted (each with "
    f"probability 1/2); {info.num_references} reference models per setting "
    f"for LiRA; delta = {info.delta:g}.",
    "",
    EVALUATION_NOTE.format(noise=info.noise),
    "",
    table(rows),
    "",
    "AUC and TPR at "
    f"{100 * fpr:g}% FPR: 95% stratified percentile bootstrap over canaries "
    "(Hanley-McNeil standard errors of the AUC in `results.json`). The "
    "one-run lower bound (Steinke, Nasr and Jagielski 2023, 95% confidence) "
    "guesses on the 10% highest and 10% lowest LiRA scores.",
    "",
    "## Verdicts",
    "",
  ]
  lines += [f"* {v}" for v in verdicts(rows, info.smoke)]
  return "\n".join(lines) + "\n"


def plot(path: str, rows: list[Row], is_member: np.ndarray) -> str:
  """ROC curves of both attacks, one line per setting, linear axes."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), sharey=True)
  cmap = plt.get_cmap("viridis")
  private = [r for r in rows if r.private]
  for ax, attack, title in (
    (axes[0], "loss_scores", "loss threshold"),
    (axes[1], "lira_scores", "offline LiRA"),
  ):
    for r in rows:
      fpr, tpr = roc.roc_curve(getattr(r, attack), is_member)
      color = (
        cmap(private.index(r) / max(len(private), 1))
        if r.private
        else ("tab:red" if r.label.startswith("SGD") else "tab:orange")
      )
      ax.plot(fpr, tpr, color=color, lw=1.4, label=r.label)
    ax.plot([0, 1], [0, 1], "k:", lw=0.8)
    ax.set_title(title)
    ax.set_xlabel("false-positive rate")
    ax.set_aspect("equal")
  axes[0].set_ylabel("true-positive rate")
  axes[1].legend(loc="lower right", fontsize=8)
  fig.suptitle("Membership inference on inserted canaries (digits, CNN)")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
  return path


def write(out: str, info: Info, rows: list[Row], is_member: np.ndarray) -> str:
  """Writes ``summary.md``, ``table.md``, ``roc.png``; returns the summary."""
  import json  # pylint: disable=g-import-not-at-top

  text = summary(info, rows)
  for name in ("summary.md", "table.md"):
    with open(os.path.join(out, name), "w") as f:
      f.write(text)
  with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(
      {"info": dataclasses.asdict(info), "rows": [r.to_dict() for r in rows]},
      f,
      indent=1,
    )
  plot(os.path.join(out, "roc.png"), rows, is_member)
  return text
