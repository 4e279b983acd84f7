"""``hidden_state_sweep``: accuracy against final-iterate epsilon, several K.

Noisy-ZOGD (Chien, Chen & Li, eq. (3)) on L2-regularized logistic
regression on digits (``configs/hidden_state_digits_logreg.py``: m/M = 0.5,
R = 0.5, Delta = 2, eta = K/M, full batch, directional fraction 1/2). For
each total noise sigma (the same for every K of a series) and each K, one
run of T steps; the final iterate's test accuracy is plotted against its
hidden-state epsilon (Thm 3.2, numerically optimized), with the composition
epsilon (Thm 3.1) of the same run for comparison.

Which K can give a bound at all is reported separately, from the
accountant alone, on a grid of K up to d/2: the smallest K at which Thm
3.2 beats composition at this T, and Cor. 3.3's minimum K (eq. (32)),
which may exceed d/2.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import zoprivacy
from configs import hidden_state_digits_logreg
from experiments import tasks
from experiments.run import hidden_state_run, resolution
from zoprivacy import hidden_state


@dataclasses.dataclass(frozen=True)
class Config:
  noise_stds: tuple = (3e-4, 1e-3, 1e-2)
  directions: tuple = (150, 250, 325)
  num_steps: int = 200
  k_grid: tuple = tuple(range(25, 326, 25))


FULL = Config()
QUICK = Config(
  noise_stds=(1e-3,), directions=(100, 325), num_steps=10, k_grid=(100, 325)
)


def run_config(cfg: Config, k: int, sigma: float):
  config = hidden_state_digits_logreg.get_config()
  config.num_steps = cfg.num_steps
  config.estimator_kwargs.num_directions = k
  config.estimator_kwargs.noise_std = sigma
  return config


def _setting(config, n: int) -> hidden_state.NoisyZOGDSetting:
  """The setting the runner builds for ``config`` (its declaration
  resolved as the runner resolves it)."""
  typed, spec = resolution.resolve(config)
  return hidden_state_run.make_setting(typed, n, spec=spec)


def train_once(config, task) -> tuple[float, hidden_state.NoisyZOGDSetting]:
  """Trains ``config`` (nothing intermediate is evaluated or saved)."""
  setting = _setting(config, task.num_train)
  tx = zoprivacy.noisy_zogd_chain(setting, direction_key=config.seed)
  batch = (jnp.asarray(task.train_inputs), jnp.asarray(task.train_labels))
  params, frozen = task.init(jax.random.key(config.seed))

  def loss(p, b):
    return task.batched_loss(p, frozen, b)

  @jax.jit
  def run(params):
    def step(carry, _):
      p, state = carry
      zeros = jax.tree.map(jnp.zeros_like, p)
      up, state = tx.update(zeros, state, p, batched_loss=loss, batch=batch)
      return (optax.apply_updates(p, up), state), None

    (p, _), _ = jax.lax.scan(
      step, (params, zoprivacy.init(tx, params)), None, length=config.num_steps
    )
    return p

  final = run(params)
  logits = task.apply(final, frozen, jnp.asarray(task.test_inputs))
  accuracy = float(
    np.mean(np.argmax(np.asarray(logits), -1) == task.test_labels)
  )
  return accuracy, setting


def feasible_directions(cfg: Config, sigma: float, n: int) -> dict:
  """Accounting only: where Thm 3.2 beats composition, and Cor. 3.3's K."""
  rows = []
  for k in cfg.k_grid:
    setting = _setting(run_config(cfg, k, sigma), n)
    bound = hidden_state.hidden_state_bound(
      setting, cfg.num_steps, setting_delta()
    )
    rows.append((k, bound.points["improved"].analysis == "theorem_3_2"))
  valid = [k for k, ok in rows if ok]
  setting = _setting(run_config(cfg, cfg.k_grid[-1], sigma), n)
  return {
    "smallest_K_theorem_32_beats_composition": min(valid, default=None),
    "corollary_33_minimum_K": hidden_state.minimum_directions(
      setting, setting_delta()
    ),
    "half_dimension": setting.dimension / 2,
  }


def setting_delta() -> float:
  return hidden_state_digits_logreg.get_config().privacy.delta


def main(
  out: str, cfg: Config = FULL, make_plot: bool = True, log=print
) -> dict:
  start = time.time()
  task = tasks.get_task(run_config(cfg, cfg.directions[0], cfg.noise_stds[0]))
  rows = []
  for sigma in cfg.noise_stds:
    for k in cfg.directions:
      t0 = time.time()
      accuracy, setting = train_once(run_config(cfg, k, sigma), task)
      report = hidden_state.final_iterate_report(
        setting, cfg.num_steps, setting_delta()
      )
      rows.append(
        {
          "sigma": sigma,
          "K": k,
          "eta": setting.step_size,
          "test_accuracy": accuracy,
          "hidden_state": report.hidden_state,
          "composition": report.composition,
          "output_perturbation": report.output_perturbation,
          "hidden_state_analysis": report.hidden_state_bound.points[
            "improved"
          ].analysis,
          "seconds": time.time() - t0,
        }
      )
      log(
        f"sigma={sigma:g} K={k}: accuracy {accuracy:.3f}, eps hidden "
        f"{report.hidden_state['improved']:.4g}, composition "
        f"{report.composition['improved']:.4g}"
      )
  ratio = setting.assumptions.condition_ratio
  feasibility = {
    s: feasible_directions(cfg, s, task.num_train) for s in cfg.noise_stds
  }
  result = {
    "config": dataclasses.asdict(cfg),
    "condition_ratio": ratio,
    "num_train": task.num_train,
    "rows": rows,
    "feasibility": feasibility,
    "seconds": time.time() - start,
  }
  with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(result, f, indent=1, default=str)
  if make_plot:
    plot(rows, cfg, os.path.join(out, "sweep.png"))
  text = summary(result)
  with open(os.path.join(out, "summary.md"), "w") as f:
    f.write(text)
  log(text)
  return result


def plot(rows, cfg: Config, path: str) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, ax = plt.subplots(figsize=(7, 4.6))
  for i, sigma in enumerate(cfg.noise_stds):
    mine = [r for r in rows if r["sigma"] == sigma]
    hid = [r["hidden_state"]["improved"] for r in mine]
    acc = [r["test_accuracy"] for r in mine]
    ax.plot(
      hid,
      acc,
      "-o",
      color=f"C{i}",
      label=f"hidden state (Thm 3.2), sigma = {sigma:g}",
    )
    ax.plot(
      [r["composition"]["improved"] for r in mine],
      acc,
      "s",
      mfc="none",
      color=f"C{i}",
      label=f"composition, sigma = {sigma:g}",
    )
    for r, x in zip(mine, hid):
      ax.annotate(
        f"K={r['K']}",
        (x, r["test_accuracy"]),
        fontsize=7,
        xytext=(3, 3),
        textcoords="offset points",
      )
  ax.axhline(0.1, color="gray", ls=":", lw=1, label="chance")
  ax.set(
    xscale="log",
    xlabel="final-iterate epsilon (delta = 1e-5)",
    ylabel="test accuracy",
    title=f"Noisy-ZOGD, digits logistic regression, T = {cfg.num_steps}",
  )
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def summary(result: dict) -> str:
  cfg = result["config"]
  lines = [
    "# Noisy-ZOGD on digits: accuracy against final-iterate epsilon",
    "",
    f"L2-regularized logistic regression, m/M = "
    f"{result['condition_ratio']:.3g}, d = 650, n = {result['num_train']}, T = "
    f"{cfg['num_steps']}, eta = K/M, delta = 1e-5 ({result['seconds']:.0f}"
    " s).",
    "",
    "| sigma | K | test accuracy | hidden state (improved) | analysis | "
    "composition (improved) | output perturbation |",
    "|---:|---:|---:|---:|---|---:|---:|",
  ]
  for r in result["rows"]:
    lines.append(
      f"| {r['sigma']:g} | {r['K']} | {r['test_accuracy']:.3f} | "
      f"{r['hidden_state']['improved']:.4g} | "
      f"{r['hidden_state_analysis']} | {r['composition']['improved']:.4g} | "
      f"{r['output_perturbation']['improved']:.3g} |"
    )
  lines += [
    "",
    "Where a hidden-state bound exists (accounting only, K up to d/2):",
    "",
  ]
  for sigma, f in result["feasibility"].items():
    lines.append(
      f"* sigma = {sigma:g}: Thm 3.2 beats composition from K = "
      f"{f['smallest_K_theorem_32_beats_composition']}; Cor. 3.3 needs K >= "
      f"{f['corollary_33_minimum_K']:.0f} (d/2 = "
      f"{f['half_dimension']:g})"
    )
  return "\n".join(lines) + "\n"
