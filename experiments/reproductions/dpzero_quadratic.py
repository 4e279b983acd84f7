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
``<= 2`` (``zoprivacy.accounting.calibrate_noise_multiplier`` with
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

EPSILON = 2.0
DELTA = 1e-6
NUM_TRAIN = 10000
NUM_TEST = 10000

# DPZero Table 6.
PAPER_DIMS = (20, 50, 100, 200, 500, 1000, 2000)
PAPER_ITERATIONS = (10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120)
PAPER_STEPSIZES = (
  1e-5,
  3e-5,
  1e-4,
  3e-4,
  1e-3,
  3e-3,
  1e-2,
  3e-2,
  0.1,
  0.3,
  1.0,
)
PAPER_CLIPS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)


@dataclasses.dataclass(frozen=True)
class GridConfig:
  """What to run. ``iterations``/``stepsizes``/``clips`` may depend on method."""

  name: str
  dims: tuple[int, ...]
  modes: tuple[str, ...]
  methods: tuple[str, ...]
  iterations: dict
  stepsizes: dict
  clips: dict
  num_train: int = NUM_TRAIN
  num_test: int = NUM_TEST
  directions: str = "sphere"
  seed: int = 0


def _same(value) -> dict:
  return {m: tuple(value) for m in quadratic.METHODS}


FULL = GridConfig(
  name="full",
  dims=PAPER_DIMS,
  modes=tuple(quadratic.HESSIANS),
  methods=quadratic.METHODS,
  iterations=_same(PAPER_ITERATIONS),
  stepsizes=_same(PAPER_STEPSIZES),
  clips=_same(PAPER_CLIPS),
)

# The region of Table 6's grid that holds the winners of the full grid
# (measured with the full grid, see REPRODUCTION.md), with fewer iteration
# counts: the zeroth-order methods win at T >= 640, DP-GD at T <= 640.
_ZO_QUICK = dict(
  iterations=(640, 2560, 5120),
  stepsizes=(1e-2, 3e-2, 0.1, 0.3, 1.0),
  clips=(0.1, 0.3, 1.0, 3.0),
)
QUICK = GridConfig(
  name="quick",
  dims=PAPER_DIMS,
  modes=tuple(quadratic.HESSIANS),
  methods=quadratic.METHODS,
  iterations={
    "dpzero": _ZO_QUICK["iterations"],
    "dpgd_zeroth": _ZO_QUICK["iterations"],
    "dp_gd": (80, 320, 640),
  },
  stepsizes={
    "dpzero": _ZO_QUICK["stepsizes"],
    "dpgd_zeroth": _ZO_QUICK["stepsizes"],
    "dp_gd": (0.1, 0.3, 1.0),
  },
  clips={
    "dpzero": _ZO_QUICK["clips"],
    "dpgd_zeroth": _ZO_QUICK["clips"],
    "dp_gd": (0.3, 1.0, 3.0, 10.0),
  },
)

# Small enough for the default test suite: one dimension, one mode, the two
# zeroth-order methods, one iteration count, the same 4 x 4 grid for both.
FAST = GridConfig(
  name="fast",
  dims=(500,),
  modes=("rank_log_d",),
  methods=("dpzero", "dpgd_zeroth"),
  iterations=_same((320,)),
  stepsizes=_same((0.03, 0.1, 0.3, 1.0)),
  clips=_same((1.0, 3.0, 10.0, 30.0)),
)

CONFIGS = {"full": FULL, "quick": QUICK, "fast": FAST}
SMOKE = "smoke run: no verdict"


# ----------------------------------------------------------- noise calibration


def noise_multipliers(
  iterations: Sequence[int], cache_path: str | None
) -> dict[int, dict]:
  """Calibrated (and Alg. 2 reference) noise multipliers for each ``T``."""
  from zoprivacy import accounting  # pylint: disable=g-import-not-at-top

  cached = {}
  if cache_path and os.path.exists(cache_path):
    with open(cache_path) as f:
      cached = {int(k): v for k, v in json.load(f).items()}
  out = {}
  for steps in sorted(set(iterations)):
    if steps not in cached:
      res = accounting.calibrate_noise_multiplier(
        target_epsilon=EPSILON,
        delta=DELTA,
        sampling_probability=1.0,
        num_steps=steps,
        mechanism="gaussian",
        neighboring="replace_one",
      )
      cached[steps] = {
        "noise_multiplier": res.noise_multiplier,
        "epsilon": res.epsilon,
        "lower_bound": res.lower_bound,
        "alg2_advanced_composition": accounting.dpzero_advanced_composition_noise_multiplier(
          epsilon=EPSILON, delta=DELTA, num_steps=steps
        ),
        "seconds": res.seconds,
      }
      if cache_path:
        _write_json(cache_path, {str(k): v for k, v in cached.items()})
    out[steps] = cached[steps]
  return out


# -------------------------------------------------------------------- running


def _write_json(path: str, obj) -> None:
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(obj, f, indent=1, sort_keys=True)
  os.replace(tmp, path)


def _slice_key(
  cfg: GridConfig, method: str, mode: str, dim: int, steps: int, sigma: float
) -> str:
  spec = json.dumps(
    [
      cfg.num_train,
      cfg.num_test,
      cfg.directions,
      cfg.seed,
      list(cfg.stepsizes[method]),
      list(cfg.clips[method]),
      round(sigma, 10),
    ]
  )
  digest = hashlib.sha1(spec.encode()).hexdigest()[:10]
  return f"{method}_{mode}_d{dim}_T{steps}_{digest}"


def run(cfg: GridConfig, out_dir: str, *, log=print) -> dict:
  """Runs (or loads from the cache) every slice of ``cfg``; returns records."""
  os.makedirs(os.path.join(out_dir, "cache"), exist_ok=True)
  all_steps = sorted({t for m in cfg.methods for t in cfg.iterations[m]})
  t0 = time.perf_counter()
  sigmas = noise_multipliers(
    all_steps, os.path.join(out_dir, "calibration.json")
  )
  calibration_seconds = time.perf_counter() - t0
  records = []
  compute_seconds = 0.0
  for mode in cfg.modes:
    for dim in cfg.dims:
      problem = None
      dirs = None
      for method in cfg.methods:
        for steps in cfg.iterations[method]:
          sigma = sigmas[steps]["noise_multiplier"]
          key = _slice_key(cfg, method, mode, dim, steps, sigma)
          path = os.path.join(out_dir, "cache", key + ".json")
          if os.path.exists(path):
            with open(path) as f:
              records.append(json.load(f))
            continue
          start = time.perf_counter()
          cpu_start = time.process_time()
          if problem is None:
            problem = quadratic.make_problem(
              mode,
              dim,
              num_train=cfg.num_train,
              num_test=cfg.num_test,
              seed=cfg.seed,
            )
          if method != "dp_gd" and dirs is None:
            max_steps = max(
              max(cfg.iterations[m]) for m in cfg.methods if m != "dp_gd"
            )
            dirs = quadratic.prepare_directions(
              problem,
              max_steps,
              jax.random.key(cfg.seed * 1000 + 1),
              cfg.directions,
            )
          res = quadratic.run_grid(
            method,
            problem,
            num_steps=steps,
            stepsizes=cfg.stepsizes[method],
            clips=cfg.clips[method],
            noise_multiplier=sigma,
            noise_key=jax.random.key(cfg.seed * 1000 + 2),
            dirs=dirs,
          )
          seconds = time.perf_counter() - start
          cpu_seconds = time.process_time() - cpu_start
          compute_seconds += seconds
          rec = {
            "method": method,
            "mode": mode,
            "dim": dim,
            "iterations": steps,
            "noise_multiplier": sigma,
            "stepsizes": list(cfg.stepsizes[method]),
            "clips": list(cfg.clips[method]),
            "seconds": seconds,
            "cpu_seconds": cpu_seconds,
            **{
              k: np.asarray(v).tolist()
              for k, v in dataclasses.asdict(res).items()
            },
          }
          _write_json(path, _json_safe(rec))
          records.append(_json_safe(rec))
          log(
            f"  {method:11s} {mode:11s} d={dim:5d} T={steps:5d}: "
            f"best test grad norm {np.min(res.test_grad_norm):.4g} "
            f"({seconds:.1f} s wall, {cpu_seconds:.1f} s CPU)"
          )
      del problem, dirs
  return {
    "records": records,
    "sigmas": sigmas,
    "calibration_seconds": calibration_seconds,
    "compute_seconds": compute_seconds,
  }


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


def estimate_runtime(
  cfg: GridConfig, *, probe_steps=(50, 450), log=print
) -> dict:
  """Predicts the wall time of ``run(cfg)`` from short timed probes.

  For every ``(method, d)`` (the cost does not depend on the Hessian mode) it
  times ``probe_steps`` steps of the grid runner at the config's grid size,
  after compilation, and fits ``seconds = overhead + steps * per_step``; it
  also times the direction/projection precomputation. The prediction sums
  these over every slice of ``cfg``. Compilation (a few seconds per method
  and d) is included once per (method, d, mode).
  """
  lo, hi = probe_steps
  total = 0.0
  rows = []
  for dim in cfg.dims:
    problem = quadratic.make_problem(
      cfg.modes[0],
      dim,
      num_train=cfg.num_train,
      num_test=cfg.num_test,
      seed=cfg.seed,
    )
    zo = [m for m in cfg.methods if m != "dp_gd"]
    prep = 0.0
    dirs = None
    if zo:
      max_steps = max(max(cfg.iterations[m]) for m in zo)
      t0 = time.perf_counter()
      dirs = quadratic.prepare_directions(
        problem, max_steps, jax.random.key(1), cfg.directions
      )
      jax.block_until_ready(dirs.proj)
      prep = time.perf_counter() - t0
    total += prep * len(cfg.modes)
    for method in cfg.methods:
      kw = dict(
        stepsizes=cfg.stepsizes[method],
        clips=cfg.clips[method],
        noise_multiplier=100.0,
        noise_key=jax.random.key(2),
        dirs=dirs,
      )
      t0 = time.perf_counter()
      quadratic.run_grid(method, problem, num_steps=lo, **kw)
      compile_s = time.perf_counter() - t0
      times = []
      for steps in (lo, hi):
        t0 = time.perf_counter()
        quadratic.run_grid(method, problem, num_steps=steps, **kw)
        times.append(time.perf_counter() - t0)
      per_step = max(times[1] - times[0], 0.0) / (hi - lo)
      overhead = max(times[0] - lo * per_step, 0.0)
      slices = cfg.iterations[method]
      predicted = len(cfg.modes) * (
        compile_s + sum(overhead + t * per_step for t in slices)
      )
      total += predicted
      rows.append(
        {
          "method": method,
          "dim": dim,
          "per_step_ms": 1e3 * per_step,
          "overhead_s": overhead,
          "compile_s": compile_s,
          "predicted_s": predicted,
        }
      )
      log(
        f"  {method:11s} d={dim:5d}: {1e3 * per_step:8.3f} ms/step, "
        f"predicted {predicted:7.1f} s over {len(cfg.modes)} modes"
      )
  log(
    f"Predicted wall time of the {cfg.name} grid: {total:.0f} s "
    f"({total / 60:.1f} min) at the machine's current load."
  )
  return {"predicted_seconds": total, "rows": rows}


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
  claims = []
  methods = [m for m in quadratic.METHODS if m in cfg.methods]
  dims = sorted(cfg.dims)

  def val(method, mode, dim):
    return best[(method, mode, dim)]["test_grad_norm"][0]

  if "dpgd_zeroth" in methods and len(methods) > 1:
    cases = [(mode, d) for mode in cfg.modes for d in dims]
    held = [
      (mode, d)
      for mode, d in cases
      if all(
        val("dpgd_zeroth", mode, d) > val(m, mode, d)
        for m in methods
        if m != "dpgd_zeroth"
      )
    ]
    claims.append(
      {
        "claim": "DPGD-0th is worst (best test gradient norm above the "
        "other methods')",
        "held": len(held) == len(cases),
        "detail": f"{len(held)}/{len(cases)} (mode, d) cases",
        "failed_cases": [c for c in cases if c not in held],
      }
    )
  if len(dims) >= 2:
    if "rank_log_d" in cfg.modes:
      slopes = {
        m: loglog_slope(dims, [val(m, "rank_log_d", d) for d in dims])
        for m in methods
        if m in ("dpzero", "dp_gd")
      }
      if slopes:
        claims.append(
          {
            "claim": "rank O(log d): DPZero and DP-GD nearly dimension-"
            "independent (log-log slope <= 0.15)",
            "held": all(s <= 0.15 for s in slopes.values()),
            "detail": ", ".join(
              f"{quadratic.METHOD_LABELS[m]} slope {s:.3f}"
              for m, s in slopes.items()
            ),
          }
        )
    if "rank_d" in cfg.modes:
      slopes = {
        m: loglog_slope(dims, [val(m, "rank_d", d) for d in dims])
        for m in methods
      }
      claims.append(
        {
          "claim": "rank d: every method grows with d (log-log slope >= 0.15)",
          "held": all(s >= 0.15 for s in slopes.values()),
          "detail": ", ".join(
            f"{quadratic.METHOD_LABELS[m]} slope {s:.3f}"
            for m, s in slopes.items()
          ),
        }
      )
  return claims


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


def plot(best: dict, cfg: GridConfig, out_dir: str) -> list[str]:
  """Fig. 1 (test gradient norm), Fig. 2 (train), Fig. 3 (losses): PNGs."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  dims = sorted(cfg.dims)
  markers = {"dpzero": "o", "dpgd_zeroth": "s", "dp_gd": "^"}
  paths = []
  figures = [
    ("fig1_test_grad_norm.png", [("test_grad_norm", "test gradient norm")]),
    (
      "fig2_train_grad_norm.png",
      [("train_grad_norm", "train gradient norm")],
    ),
    (
      "fig3_loss.png",
      [("train_loss", "train loss"), ("test_loss", "test loss")],
    ),
  ]
  for fname, rows in figures:
    fig, axes = plt.subplots(
      len(rows),
      len(cfg.modes),
      figsize=(4.2 * len(cfg.modes), 3.6 * len(rows)),
      squeeze=False,
    )
    for r, (metric, label) in enumerate(rows):
      for c, mode in enumerate(cfg.modes):
        ax = axes[r][c]
        for m in cfg.methods:
          ax.plot(
            dims,
            [best[(m, mode, d)][metric][0] for d in dims],
            marker=markers[m],
            label=quadratic.METHOD_LABELS[m],
          )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("dimension d")
        ax.set_ylabel(f"best {label}")
        ax.set_title(quadratic.HESSIANS[mode], fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        if r == 0 and c == 0:
          ax.legend()
    fig.suptitle(
      f"DPZero quadratic, (eps, delta) = ({EPSILON:g}, {DELTA:g}), "
      f"{cfg.name} grid",
      fontsize=10,
    )
    fig.tight_layout()
    path = os.path.join(out_dir, fname)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)
  return paths


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
  sigma_rows = [
    "| T | calibrated sigma (PLD, replace-one) | its epsilon | "
    "Alg. 2 advanced composition sigma |",
    "|---:|---:|---:|---:|",
  ]
  for t, s in sorted(result["sigmas"].items()):
    sigma_rows.append(
      f"| {t} | {s['noise_multiplier']:.4g} | "
      f"{s['epsilon']:.4f} | "
      f"{s['alg2_advanced_composition']:.4g} |"
    )
  cached_seconds = sum(r["seconds"] for r in result["records"])
  summary = "\n".join(
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
      *sigma_rows,
      "",
      "## Best final-iterate test gradient norm over the grid",
      table,
      "",
      "## Claims (DPZero Sec. 5 / App. B.1)",
      "",
      *(
        [f"- {SMOKE}"]
        if smoke
        else [
          f"- {'HELD' if c['held'] else 'NOT HELD'}: {c['claim']} -- "
          f"{c['detail']}"
          for c in claims
        ]
      ),
      "",
      *[f"Figure: {os.path.basename(p)}" for p in paths],
    ]
  )
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
