"""``dpzero_quadratic``: DPZero Figs. 1-3 and App. B.1 (Table 6 grid).

For each effective-rank mode (``quadratic.HESSIANS``), dimension and method,
runs every point of the grid ``iterations x stepsize x clip`` at
``(eps, delta) = (2, 1e-6)`` and keeps the best final-iterate value of each
metric over the grid, as DPZero App. B.1 does ("we perform a parameter search
and plot the best gradient norm evaluated on the training set (Figure 2) and
a test set (Figure 1) ... both training and test loss in Figure 3").

This is a *simulation of utility* on synthetic data, as in the paper: no
private data is released, so its noise is drawn from seeded keys (common
random numbers across the grid) to make the figures reproducible. It must
not be used as a template for a private run, whose noise keys are secret
(``docs/conventions.md`` §9). Like the paper, it picks the best grid point;
the reported curves are therefore optimistic by the (unaccounted) selection.

Privacy calibration (decided here, see REPRODUCTION.md). DPZero's
neighbouring relation is replace-one (Def. 2.1: same-size datasets differing
in one element) and Alg. 1/2 are full batch (p = 1). For every iteration
count ``T`` the noise multiplier is the smallest one whose pessimistic PLD
epsilon for ``T`` replace-one Gaussian releases at ``delta = 1e-6`` is
``<= 2`` (``zoprivacy.privacy.calibrate_noise_multiplier`` with
``sampling_probability=1, neighboring='replace_one'``). Alg. 2's advanced-
composition sigma (``4 C sqrt(2T log(e + eps/delta)) / (n eps)`` on the
mean) is reported next to it as a reference; it is 2.41 times larger.

Metric plotted in Fig. 1: the test gradient norm ``||grad F_test(x_T)||_2 =
||A (x_T - mean(test))||_2`` (not squared; Fig. 1's caption: "the norm of the
test gradient"), best over the grid, at the final iterate ``x_T`` (Alg. 1/2
output a uniformly random iterate; the experiments report the trained
model).

Runs are resumable: each ``(method, mode, d, T)`` grid slice is cached in
``<out>/cache/`` as soon as it finishes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from collections.abc import Sequence

import jax
import numpy as np

from experiments.reproductions import quadratic
from experiments.reproductions.dpzero_quadratic.analysis import (
  METRICS,
  _json_safe,
  best_values,
  check_claims,
  loglog_slope,
  markdown_table,
)
from experiments.reproductions.dpzero_quadratic.grid import (
  CONFIGS,
  DELTA,
  EPSILON,
  FAST,
  FULL,
  NUM_TEST,
  NUM_TRAIN,
  PAPER_DIMS,
  QUICK,
  SMOKE,
  GridConfig,
)
from experiments.reproductions.dpzero_quadratic.plots import plot
from experiments.reproductions.dpzero_quadratic.run import (
  _write_json,
  estimate_runtime,
  noise_multipliers,
  run,
)


def main(
  cfg: GridConfig, out_dir: str, *, make_plots: bool = True, log=print
) -> dict:
  start = time.perf_counter()
  log(f"dpzero_quadratic ({cfg.name} grid) -> {out_dir}")
  result = run(cfg, out_dir, log=log)
  best = best_values(result["records"])
  # The fast grid is a smoke run (one d, one iteration count): its numbers
  # show the pipeline works, not the paper's claims.
  smoke = cfg.name == "fast"
  claims = [] if smoke else check_claims(best, cfg)
  table = markdown_table(best, cfg)
  paths = plot(best, cfg, out_dir) if make_plots else []
  wall = time.perf_counter() - start
  summary = _summary(cfg, result, table, claims, smoke, paths, wall)
  with open(os.path.join(out_dir, "summary.md"), "w") as f:
    f.write(summary + "\n")
  _write_json(
    os.path.join(out_dir, "best.json"),
    _json_safe({f"{m}|{mode}|{d}": v for (m, mode, d), v in best.items()}),
  )
  log(summary)
  return {
    "best": best,
    "claims": claims,
    "smoke": smoke,
    "wall_seconds": wall,
    "figures": paths,
    "sigmas": result["sigmas"],
    "records": result["records"],
  }


def _sigma_rows(sigmas: dict) -> list[str]:
  """The calibrated noise multiplier of each iteration count, a table."""
  rows = [
    "| T | calibrated sigma (PLD, replace-one) | its epsilon | "
    "Alg. 2 advanced composition sigma |",
    "|---:|---:|---:|---:|",
  ]
  for t, s in sorted(sigmas.items()):
    rows.append(
      f"| {t} | {s['noise_multiplier']:.4g} | "
      f"{s['epsilon']:.4f} | "
      f"{s['alg2_advanced_composition']:.4g} |"
    )
  return rows


def _summary(cfg, result, table, claims, smoke, paths, wall) -> str:
  """summary.md: timings, noise multipliers, the best values, the claims."""
  cached_seconds = sum(r["seconds"] for r in result["records"])
  claim_lines = (
    [f"- {SMOKE}"]
    if smoke
    else [
      f"- {'HELD' if c['held'] else 'NOT HELD'}: {c['claim']} -- {c['detail']}"
      for c in claims
    ]
  )
  return "\n".join(
    [
      f"# dpzero_quadratic, {cfg.name} grid",
      "",
      f"Wall time of this invocation: {wall:.1f} s (grid compute run now "
      f"{result['compute_seconds']:.1f} s; compute summed over all slices "
      f"incl. cached: {cached_seconds:.1f} s; noise calibration "
      f"{result['calibration_seconds']:.1f} s).",
      f"Directions: {cfg.directions}; n = {cfg.num_train} train / "
      f"{cfg.num_test} test; seed {cfg.seed}.",
      "",
      "## Noise multipliers (std of the noise on the clipped sum / C), "
      f"(eps, delta) = ({EPSILON:g}, {DELTA:g}), full batch",
      "",
      *_sigma_rows(result["sigmas"]),
      "",
      "## Best final-iterate test gradient norm over the grid",
      table,
      "",
      "## Claims (DPZero Sec. 5 / App. B.1)",
      "",
      *claim_lines,
      "",
      *[f"Figure: {os.path.basename(p)}" for p in paths],
    ]
  )
