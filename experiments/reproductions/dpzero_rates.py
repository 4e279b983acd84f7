"""``dpzero_rates``: DPZero Table 1's dependence on d, measured.

Table 1 bounds the squared gradient norm by ``d sqrt(r)`` (DPGD-0th),
``(log d) sqrt(r)`` (DPZero) and ``sqrt(r)`` (DP-GD) with effective rank
``r``. For each Hessian mode of the quadratic ``r = Tr(A)`` is known exactly,
so each rate predicts how the *norm* (its square root) grows with ``d``. This
command fits the least-squares slope of ``log(best test gradient norm)``
against ``log d`` on the cached ``dpzero_quadratic`` results and puts it next
to the slope of the predicted rate fitted over the same dimensions.
"""

from __future__ import annotations

import glob
import json
import os

import numpy as np

from experiments.reproductions import dpzero_quadratic, quadratic


def predicted_sq_rate(method: str, mode: str, dim: int) -> float:
  """Table 1's squared-gradient-norm rate at ``r = Tr(A)`` (constants dropped)."""
  r = float(np.sum(quadratic.hessian_diagonal(mode, dim).astype(np.float64)))
  if method == "dpgd_zeroth":
    return dim * np.sqrt(r)
  if method == "dpzero":
    return np.log(dim) * np.sqrt(r)
  if method == "dp_gd":
    return np.sqrt(r)
  raise ValueError(method)


def load_records(source: str) -> list[dict]:
  records = []
  for path in sorted(glob.glob(os.path.join(source, "cache", "*.json"))):
    with open(path) as f:
      records.append(json.load(f))
  if not records:
    raise FileNotFoundError(
      f"No cached dpzero_quadratic results under {source}/cache; run "
      "`python -m experiments.reproduce dpzero_quadratic` first."
    )
  return records


def slopes(records: list[dict]) -> list[dict]:
  best = dpzero_quadratic.best_values(records)
  rows = []
  for mode in quadratic.HESSIANS:
    for method in quadratic.METHODS:
      dims = sorted({d for (m, mo, d) in best if m == method and mo == mode})
      if len(dims) < 2:
        continue
      values = [best[(method, mode, d)]["test_grad_norm"][0] for d in dims]
      iters = sorted(
        {
          r["iterations"]
          for r in records
          if r["method"] == method and r["mode"] == mode
        }
      )
      rows.append(
        {
          "mode": mode,
          "method": method,
          "dims": dims,
          "iterations": iters,
          "measured_slope": dpzero_quadratic.loglog_slope(dims, values),
          "predicted_slope": dpzero_quadratic.loglog_slope(
            dims,
            [np.sqrt(predicted_sq_rate(method, mode, d)) for d in dims],
          ),
          "values": values,
        }
      )
  return rows


def main(source: str, out_dir: str, *, log=print) -> list[dict]:
  rows = slopes(load_records(source))
  if not rows:
    raise SystemExit(
      f"dpzero_rates: the results in {source} have fewer than two "
      "dimensions per (method, Hessian), so there is no slope to fit. Run "
      "`python -m experiments.reproduce dpzero_quadratic --quick` (or the "
      "full grid) first; the --fast grid has one dimension."
    )
  lines = [
    "# dpzero_rates: log-log slope of the best test gradient norm vs d",
    "",
    f"Source: {source}. Predicted: slope of sqrt(Table 1 rate) with "
    "r = Tr(A), fitted over the same d.",
    "",
    "| Hessian | method | d range | iterations searched | measured slope | "
    "Table 1 slope |",
    "|---|---|---|---|---:|---:|",
  ]
  for r in rows:
    lines.append(
      f"| {r['mode']} | {quadratic.METHOD_LABELS[r['method']]} | "
      f"{r['dims'][0]}-{r['dims'][-1]} ({len(r['dims'])}) | "
      f"{min(r['iterations'])}-{max(r['iterations'])} | "
      f"{r['measured_slope']:.3f} | {r['predicted_slope']:.3f} |"
    )
  text = "\n".join(lines)
  with open(os.path.join(out_dir, "summary.md"), "w") as f:
    f.write(text + "\n")
  with open(os.path.join(out_dir, "slopes.json"), "w") as f:
    json.dump(rows, f, indent=1)
  log(text)
  return rows
