"""The runner's final-iterate (hidden-state) report, from the run's ledger.

The final-iterate (hidden-state) epsilon of Thm 3.2 is a statement about
one chain ``w_0 -> w_T`` run under one setting that publishes only ``w_T``.
The report computes it from the ledger, never from the config: each
segment's plan records the setting its steps ran under
(:func:`zoprivacy.hidden_state.privacy.setting_of_plan`), and
:func:`ledger_setting` gives that setting only when the ledger shows one
such chain:

* every segment has the same plan, so the same ``d, n, K, eta, sigma,
  Delta, R, xi, beta, b`` and declared loss (a ``--resume=force`` that
  changed any of them leaves two segments);
* every step was computed once: a step recorded twice was replayed (after
  a kill, a deleted checkpoint or a forced resume), and the earlier
  computation may have published a final iterate of its own, which the
  theorem does not cover;
* the ledger holds exactly the run's ``T`` steps.

Otherwise it gives the reason, and the report keeps the ledger's
composition epsilon (Thm 3.1), which covers whatever ran.

The report tells one story (:func:`format_block`): its headline is the
ledger's composition epsilon (PLD, every iterate counted as published, the
figure every budget and calibration uses); the final-iterate views are
printed under it, each labelled by how it relates to the headline, and the
first line of the report names the smallest of them only when it is below
the headline (:func:`best_below`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from experiments.run import hidden_state_run
from experiments.run.settings import Settings
from zoprivacy.hidden_state import privacy as privacy_lib
from zoprivacy.hidden_state import rdp as rdp_lib
from zoprivacy.hidden_state import setting as setting_lib
from zoprivacy.privacy.ledger import PrivacyLedger


def _fields(setting: setting_lib.NoisyZOGDSetting) -> dict:
  out = dataclasses.asdict(setting)
  out.update(out.pop("assumptions") or {})
  return out


def _show(value) -> str:
  if isinstance(value, float):
    return f"{value:.4g}"
  if isinstance(value, tuple) and len(value) > 4:
    return f"a schedule of {len(value)} values"
  return repr(value)


def setting_differences(settings) -> list[str]:
  """``'noise_std 0.003 -> 0.03'`` for each field the settings differ in."""
  rows = [_fields(s) for s in settings]
  return [
    f"{name} " + " -> ".join(_show(r[name]) for r in rows)
    for name in rows[0]
    if any(r[name] != rows[0][name] for r in rows[1:])
  ]


def _replayed(ledger: PrivacyLedger) -> tuple[int, int] | None:
  """The first and last step that two recorded ranges hold, or None."""
  ranges = ledger.ranges
  both = [
    (max(a, c), min(b, d))
    for i, (a, b) in enumerate(ranges)
    for c, d in ranges[i + 1 :]
    if max(a, c) < min(b, d)
  ]
  if not both:
    return None
  return min(x for x, _ in both), max(y for _, y in both) - 1


def ledger_setting(
  ledger: PrivacyLedger, num_steps: int
) -> tuple[setting_lib.NoisyZOGDSetting | None, str | None]:
  """``(setting, None)`` when the ledger shows one chain of ``num_steps``
  steps under one setting (module docstring), else ``(None, why)``."""
  plans = ledger.plans
  settings = [privacy_lib.setting_of_plan(p) for p in plans]
  if not plans or any(s is None for s in settings):
    return None, (
      "the ledger's plans do not record the Noisy-ZOGD setting (a ledger "
      "written by an earlier version, or another estimator's steps)"
    )
  if len(plans) > 1:
    diffs = setting_differences(settings) or ["the privacy plan"]
    return None, (
      f"the ledger's steps ran under {len(plans)} settings (a resume under "
      f"a changed config): {'; '.join(diffs)}. Thm 3.2 covers one setting "
      "for the whole chain"
    )
  replayed = _replayed(ledger)
  if replayed is not None:
    a, b = replayed
    return None, (
      f"steps {a}..{b} were computed more than once (a resume replayed "
      "them, after a kill, a deleted checkpoint or a forced resume): an "
      "earlier computation may have published a final iterate of its own, "
      "and Thm 3.2 covers one chain that publishes one"
    )
  if ledger.num_steps != num_steps:
    return None, (
      f"the ledger holds {ledger.num_steps} steps, the run {num_steps}"
    )
  return settings[0], None


def final_iterate(
  settings: Settings, ledger: PrivacyLedger, num_steps: int, *, history=()
) -> dict[str, Any]:
  """The final-iterate block of ``result.json``: the three epsilons of the
  setting the ledger records, or ``{"refused": why}``."""
  published = hidden_state_run.published_outputs(settings, history)
  if published:
    return {
      "refused": "the final-iterate (hidden-state) epsilon does not "
      "apply: intermediate outputs are published: " + "; ".join(published)
    }
  setting, why = ledger_setting(ledger, num_steps)
  if setting is None:
    return {"refused": why + "; the composition epsilon above is the run's"}
  report = privacy_lib.final_iterate(setting, num_steps, ledger.delta)
  out = report.to_dict()
  out["full_batch"] = setting.full_batch
  out["condition_ratio"] = setting.assumptions.condition_ratio
  return out


VIEWS = {
  "hidden_state_epsilon": "hidden state (Thm 3.2)",
  "composition_epsilon": "composition (Thm 3.1)",
  "output_perturbation_epsilon": "output perturbation (last step alone)",
}


def best_below(block: dict[str, Any], headline: float):
  """``(epsilon, view)``: the smallest final-iterate figure (improved
  conversion) when it is below the headline epsilon, else ``None``."""
  if not block or "refused" in block:
    return None
  eps, name = min((block[k]["improved"], k) for k in VIEWS)
  return (eps, VIEWS[name]) if eps < headline else None


def _relation(block, name, headline) -> str:
  eps = block[name]["improved"]
  if name == "composition_epsilon":
    if not block["full_batch"]:
      return "amplified by sampling without replacement (WBK'19), which the \
headline's charge of each mini-batch as a full batch does not count"
    return "the headline's steps in RDP, looser than the headline's PLD"
  if eps < headline:
    return "below the headline, which counts every iterate as published"
  return "not below the headline, which stands"


def format_block(block: dict[str, Any], headline: float) -> str:
  """The final-iterate lines under the report's headline epsilon."""
  if "refused" in block:
    return "final-iterate epsilon: not reported (" + block["refused"] + ")"

  def fmt(values):
    return ", ".join(f"{values[c]:.4g} ({c})" for c in rdp_lib.CONVERSIONS)

  lines = [
    f"final iterate only (replace-one, RDP; delta = {block['delta']:g}, "
    f"T = {block['num_steps']}; the other views of this run):"
  ]
  lines += [
    f"  {label}: {fmt(block[name])}: {_relation(block, name, headline)}"
    for name, label in VIEWS.items()
  ]
  if block["hidden_state_analysis"] == "composition":
    lines.append("  (Thm 3.2 gave no smaller value than composition here)")
  else:
    lines.append(
      f"  hidden-state window T - tau = "
      f"{block['num_steps'] - block['hidden_state_tau']}, failure term "
      f"{block['hidden_state_failure_probability']:.3g} + conversion delta "
      f"{block['hidden_state_conversion_delta']:.3g}"
    )
  lines.append(f"  m/M = {block['condition_ratio']:.3g}")
  return "\n".join(lines)
