"""Best values over the grid, log-log slopes and the paper's claims."""

from __future__ import annotations

import math

import numpy as np

from experiments.reproductions import quadratic
from experiments.reproductions.dpzero_quadratic.grid import (
  GridConfig,
)


def _json_safe(obj):
  if isinstance(obj, float):
    return obj if math.isfinite(obj) else None
  if isinstance(obj, list):
    return [_json_safe(x) for x in obj]
  if isinstance(obj, dict):
    return {k: _json_safe(v) for k, v in obj.items()}
  return obj


def _array(values) -> np.ndarray:
  return np.array(
    [[np.inf if v is None else v for v in row] for row in values],
    np.float64,
  )


METRICS = ("test_grad_norm", "train_grad_norm", "train_loss", "test_loss")


def best_values(records: list[dict]) -> dict:
  """``{(method, mode, dim): {metric: (best, T, stepsize, clip)}}``."""
  best = {}
  for rec in records:
    k = (rec["method"], rec["mode"], rec["dim"])
    entry = best.setdefault(k, {})
    for metric in METRICS:
      arr = _array(rec[metric])
      i, j = np.unravel_index(np.argmin(arr), arr.shape)
      val = float(arr[i, j])
      if metric not in entry or val < entry[metric][0]:
        entry[metric] = (
          val,
          rec["iterations"],
          rec["stepsizes"][i],
          rec["clips"][j],
        )
  return best


# ------------------------------------------------------------------- analysis


def loglog_slope(dims, values) -> float:
  """Least-squares slope of ``log value`` against ``log d``."""
  x = np.log(np.asarray(dims, np.float64))
  y = np.log(np.asarray(values, np.float64))
  return float(np.polyfit(x, y, 1)[0])


def check_claims(best: dict, cfg: GridConfig) -> list[dict]:
  """The three claims of DPZero Sec. 5 / App. B.1, checked on ``best``.

  1. "DPGD-0th (Algorithm 1) has the worst performance" (every mode, every d).
  2. With effective rank O(log d), DPZero and DP-GD are "nearly dimension-
     independent": their log-log slope of the best test gradient norm
     against d is at most 0.15, the average slope over d in [20, 2000] of
     DPZero's own Table 1 rate ``sqrt((log d) sqrt(r))`` at ``r = log d``.
  3. With effective rank d, "every method scales with the dimension": every
     slope is at least 0.15 (all of Table 1's rank-d rates exceed 0.25).
  """
  methods = [m for m in quadratic.METHODS if m in cfg.methods]
  dims = sorted(cfg.dims)
  claims = []
  if "dpgd_zeroth" in methods and len(methods) > 1:
    claims.append(_zeroth_is_worst(best, cfg.modes, methods, dims))
  if len(dims) >= 2 and "rank_log_d" in cfg.modes:
    flat = [m for m in methods if m in ("dpzero", "dp_gd")]
    if flat:
      slopes = _slopes(best, "rank_log_d", flat, dims)
      claims.append(
        {
          "claim": "rank O(log d): DPZero and DP-GD nearly dimension-"
          "independent (log-log slope <= 0.15)",
          "held": all(s <= 0.15 for s in slopes.values()),
          "detail": _slopes_detail(slopes),
        }
      )
  if len(dims) >= 2 and "rank_d" in cfg.modes:
    slopes = _slopes(best, "rank_d", methods, dims)
    claims.append(
      {
        "claim": "rank d: every method grows with d (log-log slope >= 0.15)",
        "held": all(s >= 0.15 for s in slopes.values()),
        "detail": _slopes_detail(slopes),
      }
    )
  return claims


def _value(best: dict, method: str, mode: str, dim: int) -> float:
  return best[(method, mode, dim)]["test_grad_norm"][0]


def _zeroth_is_worst(best: dict, modes, methods, dims) -> dict:
  """Claim 1: DPGD-0th's best value is above every other method's."""
  cases = [(mode, d) for mode in modes for d in dims]
  held = [
    (mode, d)
    for mode, d in cases
    if all(
      _value(best, "dpgd_zeroth", mode, d) > _value(best, m, mode, d)
      for m in methods
      if m != "dpgd_zeroth"
    )
  ]
  return {
    "claim": "DPGD-0th is worst (best test gradient norm above the "
    "other methods')",
    "held": len(held) == len(cases),
    "detail": f"{len(held)}/{len(cases)} (mode, d) cases",
    "failed_cases": [c for c in cases if c not in held],
  }


def _slopes(best: dict, mode: str, methods, dims) -> dict:
  """Each method's log-log slope of its best value against d."""
  return {
    m: loglog_slope(dims, [_value(best, m, mode, d) for d in dims])
    for m in methods
  }


def _slopes_detail(slopes: dict) -> str:
  return ", ".join(
    f"{quadratic.METHOD_LABELS[m]} slope {s:.3f}" for m, s in slopes.items()
  )


def markdown_table(best: dict, cfg: GridConfig, metric="test_grad_norm"):
  lines = []
  for mode in cfg.modes:
    lines.append(
      f"\n{quadratic.HESSIANS[mode]}: best {metric} (T, stepsize, clip)\n"
    )
    lines.append(
      "| d | "
      + " | ".join(quadratic.METHOD_LABELS[m] for m in cfg.methods)
      + " |"
    )
    lines.append("|---:|" + "---|" * len(cfg.methods))
    for dim in sorted(cfg.dims):
      cells = []
      for m in cfg.methods:
        v, t, s, c = best[(m, mode, dim)][metric]
        cells.append(f"{v:.4g} ({t}, {s:g}, {c:g})")
      lines.append(f"| {dim} | " + " | ".join(cells) + " |")
  return "\n".join(lines)
