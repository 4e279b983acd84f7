"""The one-paragraph report of a finished run (metrics, plan, epsilon)."""

from __future__ import annotations

import math
from typing import Any

from experiments.run import chance, final_iterate
from experiments.run.metrics import NOT_ACCOUNTED, metric_label


def _mesh_note(mesh) -> str:
  if not mesh or all(size == 1 for size in mesh.values()):
    return ""
  shape = ", ".join(f"{k}={v}" for k, v in mesh.items() if v != 1)
  return f" on a mesh of {math.prod(mesh.values())} devices ({shape})"


# Above this epsilon a report says, on its first line, that the guarantee
# is too weak to mean much (e^10 ~ 22,000: an adversary's odds on any one
# example may grow that many times).
WEAK_EPSILON = 10.0


def _plain(value: float) -> str:
  """``13,839`` or ``12.35``: an epsilon as a reader reads it."""
  return f"{value:,.0f}" if value >= 1000 else f"{value:.4g}"


def _loose(result: dict[str, Any]) -> list[str]:
  """Why the reported epsilon is a loose (upper) bound, if it is."""
  out = []
  if "RDP accountant" in result.get("privacy", ""):
    out.append("an RDP bound, looser than the PLD accountant's")
  composition = (result.get("ledger") or {}).get("composition")
  if composition:
    out.append(f"the ledger is composed by {composition}")
  notes = (result.get("privacy_plan") or {}).get("notes") or []
  out += [n for n in notes if "charged" in n]
  best = final_iterate.best_below(
    result.get("final_iterate"), result["epsilon"]
  )
  if best is not None:
    out.append(
      "every iterate counted as published, while this run publishes only "
      f"the final one, whose epsilon is {_plain(best[0])} ({best[1]}, "
      "below)"
    )
  return out


def headline_warning(result: dict[str, Any]) -> str | None:
  """The report's first line when its epsilon is above
  :data:`WEAK_EPSILON` or comes from a loose bound, else ``None``."""
  if result.get("delta") is None:
    return None
  parts = []
  eps = result["epsilon"]
  if eps > WEAK_EPSILON:
    parts.append(
      f"epsilon {_plain(eps)} is above {WEAK_EPSILON:g}: a guarantee this "
      "weak says little about any one example"
    )
  loose = _loose(result)
  if loose:
    parts.append("the epsilon is a loose bound: " + "; ".join(loose))
  return "WARNING: " + "; ".join(parts) + "." if parts else None


def _privacy_lines(result: dict[str, Any]) -> str:
  """The report's privacy lines: (epsilon, delta) and how they came."""
  if result["delta"] is None:
    privacy = "privacy: none (non-private baseline, epsilon = inf)"
  else:
    privacy = (
      f"privacy: (epsilon, delta) = ({result['epsilon']:.4f}, "
      f"{result['delta']:g}) [{result['privacy']}; noise multiplier "
      f"{result['noise_multiplier_source']}]"
    )
    ledger = result.get("ledger") or {}
    if ledger.get("composition"):
      privacy += (
        f"\nthe epsilon is composed by {ledger['composition']}, looser than "
        f"the PLD at the plan's discretization: {ledger['composition_why']}"
      )
    segments = ledger.get("segments")
    if segments:
      privacy += (
        f"\nthe epsilon composes the ledger's {len(segments)} plans (a "
        "resume under another config; the plan above is the last): "
        + "; ".join(
          f"{s['num_steps']} steps at noise multiplier "
          f"{s['noise_multiplier']:.4g}"
          for s in segments
        )
      )
    if result.get("target_epsilon") is not None:
      privacy += (
        f"\nplanned target epsilon {result['target_epsilon']:g}; actual "
        f"epsilon {result['epsilon']:.4f}"
      )
    if not result["private"]:
      privacy += (
        "\nWARNING: insecure test noise: the noise and batches are "
        "reproducible from the seed; this run is NOT private."
      )
  if "pure_epsilon" in result:
    privacy += (
      f"\npure epsilon (Laplace, basic composition, DP-ZO Thm 3.1): "
      f"{result['pure_epsilon']:.4f}"
    )
  if "final_iterate" in result:
    privacy += "\n" + final_iterate.format_block(
      result["final_iterate"], result["epsilon"]
    )
  return privacy


def _steps_line(result: dict[str, Any]) -> str:
  """``steps: 68 (3 epochs; 4.1 s)``."""
  epochs = result.get("num_epochs")
  length = f"{result['num_steps']}"
  timing = f"{result['train_seconds']:.1f} s"
  if epochs is not None:
    counted = str(result.get("num_epochs_source", "")).startswith("counted")
    plural = "" if epochs == 1 else "s"
    timing = f"{'~' * counted}{epochs:.3g} epoch{plural}; {timing}"
  return f"steps: {length} ({timing})"


def _physical_line(result: dict[str, Any]) -> str | None:
  """The physical batch, when set: a memory setting, not a privacy one."""
  physical = result.get("physical_batch_size")
  if physical is None:
    return None
  return (
    f"physical batch: {physical} rows at a time (a memory setting, not a "
    "privacy one: one release per step)"
  )


def format_report(result: dict[str, Any]) -> str:
  """The closing lines of a run: the task's metrics (accuracy, or F1 and
  exact match), steps and privacy spent; first a warning when the metrics
  were computed on private records (``evaluation_privacy``: not private,
  not accounted), then a line when the score is within noise of chance
  (:func:`experiments.run.chance.headline`), then a warning when the
  epsilon is weak or loose (:func:`headline_warning`)."""
  names = result.get("metric_names") or [
    result.get("headline_metric", "test_accuracy")
  ]
  labels = [metric_label(name) for name in names]
  if result.get("public_proxy"):
    labels[0] = (
      "public validation "
      + labels[0].removeprefix("test ")
      + " (public proxy, no private data)"
    )
  private_records = result.get("evaluation_privacy")
  if private_records:
    labels = [f"{lab} ({NOT_ACCOUNTED})" for lab in labels]
  lines = [
    f"WARNING: {private_records}." if private_records else None,
    chance.headline(result, labels[0]),
    headline_warning(result),
    f"estimator: {result['estimator']} on {result['dataset']}",
    *(f"{lab}: {result[n]:.4f}" for lab, n in zip(labels, names)),
    _steps_line(result) + _mesh_note(result.get("mesh")),
    _physical_line(result),
    _privacy_lines(result),
  ]
  if result.get("defaults_filled"):
    lines.append(
      f"note: {len(result['defaults_filled'])} fields from "
      "configs/default.py (the config leaves them out; result.json's "
      "defaults_filled names them)"
    )
  if str(result.get("learning_rate_source", "")).endswith("default"):
    lines.append(
      f"learning rate: {result['learning_rate']:g} "
      f"({result['learning_rate_source']})"
    )
  if result.get("estimator_kwargs_carried_over"):
    lines.append(
      "note: estimator_kwargs carried over from the config's estimator: "
      + ", ".join(result["estimator_kwargs_carried_over"])
    )
  if result.get("warning"):
    lines.append(f"WARNING: {result['warning']}")
  if result.get("plot"):
    lines.append(f"plot: {result['plot']}")
  return "\n".join(line for line in lines if line is not None)
