"""Noise calibration, the resumable grid runner and its runtime estimate."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Sequence

import jax
import numpy as np

from experiments.reproductions import quadratic, quadratic_grid
from experiments.reproductions.dpzero_quadratic.analysis import (
  _json_safe,
)
from experiments.reproductions.dpzero_quadratic.grid import (
  DELTA,
  EPSILON,
  GridConfig,
)
from zoprivacy import accounting, privacy
from zoprivacy.privacy import randomness


def _test_noise_key(seed: int):
  """The reproduction's reproducible noise, through the documented insecure
  test-noise option (it warns: these runs are NOT private; they reproduce
  the paper's optimization curves, not a private training)."""
  return randomness.jax_noise_key(randomness.insecure_test_secret(seed))


# ----------------------------------------------------------- noise calibration


def noise_multipliers(
  iterations: Sequence[int], cache_path: str | None
) -> dict[int, dict]:
  """Calibrated (and Alg. 2 reference) noise multipliers for each ``T``."""

  cached = {}
  if cache_path and os.path.exists(cache_path):
    with open(cache_path) as f:
      cached = {int(k): v for k, v in json.load(f).items()}
  out = {}
  for steps in sorted(set(iterations)):
    if steps not in cached:
      res = privacy.calibrate_noise_multiplier(
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
      inputs = {}  # the problem and directions, built on first need
      for method in cfg.methods:
        for steps in cfg.iterations[method]:
          sigma = sigmas[steps]["noise_multiplier"]
          key = _slice_key(cfg, method, mode, dim, steps, sigma)
          path = os.path.join(out_dir, "cache", key + ".json")
          if os.path.exists(path):
            with open(path) as f:
              records.append(json.load(f))
            continue
          res, rec = _run_slice(cfg, inputs, method, mode, dim, steps, sigma)
          compute_seconds += rec["seconds"]
          _write_json(path, rec)
          records.append(rec)
          log(
            f"  {method:11s} {mode:11s} d={dim:5d} T={steps:5d}: "
            f"best test grad norm {np.min(res.test_grad_norm):.4g} "
            f"({rec['seconds']:.1f} s wall, {rec['cpu_seconds']:.1f} s CPU)"
          )
      del inputs
  return {
    "records": records,
    "sigmas": sigmas,
    "calibration_seconds": calibration_seconds,
    "compute_seconds": compute_seconds,
  }


def _slice_inputs(cfg: GridConfig, inputs: dict, method, mode, dim):
  """The (mode, dim) problem and, for a zeroth-order method, its directions
  (enough for the longest zeroth-order run), built once into ``inputs``."""
  if "problem" not in inputs:
    inputs["problem"] = quadratic.make_problem(
      mode,
      dim,
      num_train=cfg.num_train,
      num_test=cfg.num_test,
      seed=cfg.seed,
    )
  if method != "dp_gd" and "dirs" not in inputs:
    max_steps = max(max(cfg.iterations[m]) for m in cfg.methods if m != "dp_gd")
    inputs["dirs"] = quadratic_grid.prepare_directions(
      inputs["problem"],
      max_steps,
      jax.random.key(cfg.seed * 1000 + 1),
      cfg.directions,
    )
  return inputs["problem"], inputs.get("dirs")


def _run_slice(cfg: GridConfig, inputs, method, mode, dim, steps, sigma):
  """One slice's grid over stepsizes and clips: its result and that result
  as a JSON-safe record."""
  start = time.perf_counter()
  cpu_start = time.process_time()
  problem, dirs = _slice_inputs(cfg, inputs, method, mode, dim)
  res = quadratic_grid.run_grid(
    method,
    problem,
    num_steps=steps,
    stepsizes=cfg.stepsizes[method],
    clips=cfg.clips[method],
    noise_multiplier=sigma,
    noise_key=_test_noise_key(cfg.seed * 1000 + 2),
    dirs=dirs,
  )
  rec = {
    "method": method,
    "mode": mode,
    "dim": dim,
    "iterations": steps,
    "noise_multiplier": sigma,
    "stepsizes": list(cfg.stepsizes[method]),
    "clips": list(cfg.clips[method]),
    "seconds": time.perf_counter() - start,
    "cpu_seconds": time.process_time() - cpu_start,
    **{k: np.asarray(v).tolist() for k, v in dataclasses.asdict(res).items()},
  }
  return res, _json_safe(rec)


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
    dirs, prep = _timed_directions(cfg, problem)
    total += prep * len(cfg.modes)
    for method in cfg.methods:
      row = _probe(cfg, method, problem, dirs, probe_steps)
      row["dim"] = dim
      total += row["predicted_s"]
      rows.append(row)
      log(
        f"  {method:11s} d={dim:5d}: {row['per_step_ms']:8.3f} ms/step, "
        f"predicted {row['predicted_s']:7.1f} s over {len(cfg.modes)} modes"
      )
  log(
    f"Predicted wall time of the {cfg.name} grid: {total:.0f} s "
    f"({total / 60:.1f} min) at the machine's current load."
  )
  return {"predicted_seconds": total, "rows": rows}


def _timed_directions(cfg: GridConfig, problem):
  """The zeroth-order methods' directions (None without one) and the
  seconds their precomputation took."""
  zo = [m for m in cfg.methods if m != "dp_gd"]
  if not zo:
    return None, 0.0
  max_steps = max(max(cfg.iterations[m]) for m in zo)
  t0 = time.perf_counter()
  dirs = quadratic_grid.prepare_directions(
    problem, max_steps, jax.random.key(1), cfg.directions
  )
  jax.block_until_ready(dirs.proj)
  return dirs, time.perf_counter() - t0


def _probe(cfg: GridConfig, method, problem, dirs, probe_steps) -> dict:
  """Times ``method``'s grid at the probe step counts (after compiling it)
  and predicts its slices' seconds over every mode."""
  lo, hi = probe_steps
  kw = dict(
    stepsizes=cfg.stepsizes[method],
    clips=cfg.clips[method],
    noise_multiplier=100.0,
    noise_key=_test_noise_key(2),
    dirs=dirs,
  )
  t0 = time.perf_counter()
  quadratic_grid.run_grid(method, problem, num_steps=lo, **kw)
  compile_s = time.perf_counter() - t0
  times = []
  for steps in (lo, hi):
    t0 = time.perf_counter()
    quadratic_grid.run_grid(method, problem, num_steps=steps, **kw)
    times.append(time.perf_counter() - t0)
  per_step = max(times[1] - times[0], 0.0) / (hi - lo)
  overhead = max(times[0] - lo * per_step, 0.0)
  slices = cfg.iterations[method]
  predicted = len(cfg.modes) * (
    compile_s + sum(overhead + t * per_step for t in slices)
  )
  return {
    "method": method,
    "per_step_ms": 1e3 * per_step,
    "overhead_s": overhead,
    "compile_s": compile_s,
    "predicted_s": predicted,
  }
