"""``python -m zoprivacy.audit``: audit registered estimators for one step.

    python -m zoprivacy.audit --estimator dpzero --epsilon 1 \\
        --trials 20000 --out /tmp/audit

Each named estimator (``dp_zo/laplace`` picks a mechanism, ``dpzero@float``
the floating-point opt-in; the default paths are exact noise: scalar, and
exact vector noise for the vector ones but Noisy-ZOGD, whose secure_mode is
snapped to a lattice) is calibrated so
that one full-batch step has the target epsilon (its accountant's, at
``--delta``), then plays the distinguishing game with a worst-case canary
(:mod:`zoprivacy.audit.distinguishing_game`). Writes ``audit.md`` (a table:
estimator, accountant epsilon, audit lower bound, ratio), ``audit.json``
and ``audit.png`` to ``--out``, and prints the table. A lower bound above
the accountant's epsilon (ratio above 1) is a privacy violation, reported
with exit status 1.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

DEFAULT_ESTIMATORS = (
  "dpzero",
  "dpzero@float",
  "dp_zo",
  "dp_zo/laplace",
  "dp_zo/laplace@float",
  "dp_sgd",
  "dp_sgd@float",
  "dpgd_zeroth",
  "pazo_m",
  "pazo_p",
  "pazo_s",
  "dpmd",
  "dope_sgd",
  "gep",
  "noisy_zogd",
)


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(
    prog="python -m zoprivacy.audit",
    description="Empirical epsilon lower bounds for one estimator step.",
  )
  p.add_argument(
    "--estimator",
    nargs="+",
    default=list(DEFAULT_ESTIMATORS),
    help="registered names, optionally name/mechanism (default: %(default)s)",
  )
  p.add_argument("--epsilon", type=float, default=1.0, help="target epsilon")
  p.add_argument("--delta", type=float, default=1e-5)
  p.add_argument(
    "--trials", type=int, default=20000, help="trials per world (>= 2)"
  )
  p.add_argument("--confidence", type=float, default=0.95)
  p.add_argument("--batch-size", type=int, default=8)
  p.add_argument("--seed", type=int, default=0, help="the auditor's seed")
  p.add_argument("--out", type=pathlib.Path, required=True)
  return p


def markdown_table(rows, *, args) -> str:
  lines = [
    f"# Privacy audit: one step, target epsilon {args.epsilon:g}, "
    f"delta {args.delta:g}",
    "",
    f"Distinguishing game with a worst-case canary (add/remove, full "
    f"batch of {args.batch_size}), {args.trials} trials per world (half "
    f"choose the threshold, half evaluate it), Clopper-Pearson lower "
    f"bound at {args.confidence:.0%} confidence, auditor seed {args.seed}.",
    "",
    "| estimator | noise multiplier | accountant eps | audit lower bound "
    "| ratio | FPR | FNR | seconds |",
    "|---|---|---|---|---|---|---|---|",
  ]
  for r in rows:
    lines.append(
      f"| {r['estimator']} | {r['noise_multiplier']:.4f} | "
      f"{r['accountant_epsilon']:.4f} | {r['audit_lower_bound']:.4f} | "
      f"{r['ratio']:.3f} | {r['false_positive_rate']:.4f} | "
      f"{r['false_negative_rate']:.4f} | {r['seconds']:.1f} |"
    )
  lines.append("")
  return "\n".join(lines)


def plot(rows, path: pathlib.Path) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  labels = [r["estimator"] for r in rows]
  x = range(len(rows))
  fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 2, 3.5))
  ax.bar(
    [i - 0.2 for i in x],
    [r["accountant_epsilon"] for r in rows],
    width=0.4,
    label="accountant epsilon",
  )
  ax.bar(
    [i + 0.2 for i in x],
    [r["audit_lower_bound"] for r in rows],
    width=0.4,
    label="audit lower bound (95%)",
  )
  ax.set_xticks(list(x), labels)
  ax.set_ylabel("epsilon (one step)")
  ax.legend(loc="lower right")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def main(argv=None) -> int:
  args = _parser().parse_args(argv)
  if args.trials < 2:
    raise SystemExit("--trials must be >= 2.")
  # Imported here: the audit imports JAX and the estimators; --help and
  # argument errors are answered before they load.
  from zoprivacy.audit import calibrated, distinguishing_game

  game = distinguishing_game.worst_case_canary_game(
    num_examples=args.batch_size
  )
  rows = []
  for label in args.estimator:
    t0 = time.perf_counter()
    target = calibrated.calibrated(
      label,
      target_epsilon=args.epsilon,
      delta=args.delta,
      batch_size=args.batch_size,
    )
    result = distinguishing_game.run_game(
      target.estimator,
      game=game,
      num_trials=args.trials,
      delta=args.delta,
      confidence=args.confidence,
      seed=args.seed,
      statistic=target.statistic,
      extra_args=target.extra_args,
      step=target.step,
    )
    rows.append(
      dict(
        estimator=label,
        noise_multiplier=target.noise_multiplier,
        accountant_epsilon=result.accountant_epsilon,
        audit_lower_bound=result.epsilon_lower_bound,
        ratio=result.ratio,
        false_positive_rate=result.audit.false_positive_rate,
        false_negative_rate=result.audit.false_negative_rate,
        threshold=result.audit.threshold,
        plan=result.plan_description,
        seconds=time.perf_counter() - t0,
      )
    )
  args.out.mkdir(parents=True, exist_ok=True)
  table = markdown_table(rows, args=args)
  (args.out / "audit.md").write_text(table)
  (args.out / "audit.json").write_text(json.dumps(rows, indent=2) + "\n")
  plot(rows, args.out / "audit.png")
  print(table)
  violations = [r["estimator"] for r in rows if r["ratio"] > 1.0]
  if violations:
    print(
      "PRIVACY VIOLATION: audit lower bound above the accountant epsilon "
      f"for {', '.join(violations)}",
      file=sys.stderr,
    )
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
