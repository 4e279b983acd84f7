"""A tuning's report: the lines ``python -m experiments.tune`` prints.

:func:`format_report` reads only ``result.json``'s fields (the per-trial and
total epsilon, the trial count's distribution, never the number of trials
drawn, which stays secret) and names a weaker choice (insecure test noise,
replayed steps) where the result holds one.
"""

from __future__ import annotations

from experiments.tuning import budget


def format_report(result: dict) -> str:
  dist = result["trial_count_distribution"]
  count = budget.trial_count(
    dist["distribution"], dist["mean"], float(dist["shape"])
  )
  lines = [
    f"tuning: {result['method']}",
    f"  trials: {count.describe()} (the number drawn is secret)",
    f"  per trial: {result['per_trial_noise']} noise, epsilon "
    f"{result['per_trial_epsilon']:.4f} [{result['per_trial_privacy']}]",
    f"  score: correct of {result['validation_size']} validation examples "
    f"(fraction {result['validation_fraction']:g}, neighbour-stable) plus "
    f"exact discrete Gaussian noise {result['score_noise']:g}",
    f"  total: epsilon {result['total_epsilon']:.4f}, delta "
    f"{result['delta']:g} ({result['accountant']})",
  ]
  lines += [
    f"  WARNING: {result[k]}"
    for k in ("replayed_steps", "warning")
    if result.get(k)
  ]
  released = result["released"]
  if released is None:
    lines.append("  released: nothing (the draw gave no trial)")
  else:
    lines.append(
      f"  released: {released['hyperparameters']}, noisy validation "
      f"accuracy {released['noisy_validation_accuracy']:.4f}, test "
      f"accuracy {released['test_accuracy']:.4f}"
    )
  if not result["private"]:
    lines.append("  NOT PRIVATE: insecure test noise")
  return "\n".join(lines)
