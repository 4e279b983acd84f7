"""The one-paragraph report of a finished run (metrics, plan, epsilon)."""

from __future__ import annotations

import math
from typing import Any

from experiments import hidden_state_run
from experiments.metrics import metric_label


def _mesh_note(mesh) -> str:
  if not mesh or all(size == 1 for size in mesh.values()):
    return ""
  shape = ", ".join(f"{k}={v}" for k, v in mesh.items() if v != 1)
  return f" on a mesh of {math.prod(mesh.values())} devices ({shape})"


def format_report(result: dict[str, Any]) -> str:
  """The closing lines of a run: the task's metrics (accuracy, or F1 and
  exact match), steps and privacy spent."""
  if result["delta"] is None:
    privacy = "privacy: none (non-private baseline, epsilon = inf)"
  else:
    privacy = (
      f"privacy: (epsilon, delta) = ({result['epsilon']:.4f}, "
      f"{result['delta']:g}) [{result['privacy']}; noise multiplier "
      f"{result['noise_multiplier_source']}]"
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
    privacy += "\n" + hidden_state_run.format_final_iterate(
      result["final_iterate"]
    )
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
  lines = [
    f"estimator: {result['estimator']} on {result['dataset']}",
    *(f"{lab}: {result[n]:.4f}" for lab, n in zip(labels, names)),
    f"steps: {result['num_steps']} ({result['train_seconds']:.1f} s)"
    + _mesh_note(result.get("mesh")),
    privacy,
  ]
  if result.get("estimator_kwargs_carried_over"):
    lines.append(
      "note: estimator_kwargs carried over from the config's estimator: "
      + ", ".join(result["estimator_kwargs_carried_over"])
    )
  if result.get("warning"):
    lines.append(f"WARNING: {result['warning']}")
  if result.get("plot"):
    lines.append(f"plot: {result['plot']}")
  return "\n".join(lines)
