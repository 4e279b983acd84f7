"""``hidden_state_fig1``: Fig. 1 of Chien, Chen & Li (hidden-state ZO privacy).

Epsilon of the final iterate of Noisy-ZOGD against the number of steps T,
at one noise level sigma for every line, by three analyses:

* composition (Thm 3.1 with eq. (3)'s ``beta_t = 0``: all noise
  directional, ``directional_fraction = 1``; it does not depend on K);
* output perturbation (the Fig. 1 setup's RDP ``alpha (2R)^2 d / (2 eta^2
  sigma^2)``, all noise isotropic, at the largest tested ``eta``);
* hidden state (Thm 3.2 minimized numerically over tau, beta_t, a_t, the
  concentration parameter and the order; the split is a design choice, so
  the optimal schedule is the mechanism's), with Cor. 3.3's closed form
  (dashed) for comparison.

Setup (App. A.3): R = 1, M = 1, m = 0.9, Delta = 1, eta = K/M. Not given in
the paper and chosen here: d = 10^4, n = 1000, sigma = 0.05, delta = 1e-5,
smoothing xi = Cor. 3.3's largest ``2 Delta / (n eta M sqrt(2d))``, and
K in {200, 500, 1000, 2000}, each above Cor. 3.3's minimum K (eq. (32) and
the main text's stricter form). Panel (a) uses the standard RDP-to-DP
conversion, as the paper does; the table gives both conversions. Panel (b)
compares the hidden-state bound with the standard analysis (composition)
for three clip norms Delta at K = 500.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time

import numpy as np

from zoprivacy import hidden_state
from zoprivacy.hidden_state import setting as setting_lib


@dataclasses.dataclass(frozen=True)
class Config:
  dimension: int = 10_000
  dataset_size: int = 1000
  noise_std: float = 0.05
  delta: float = 1e-5
  radius: float = 1.0
  smoothness: float = 1.0
  strong_convexity: float = 0.9
  clip: float = 1.0
  directions: tuple = (200, 500, 1000, 2000)
  steps: tuple = tuple(
    int(t) for t in np.unique(np.round(np.geomspace(1, 10_000, 20)).astype(int))
  )
  panel_b_directions: int = 500
  panel_b_clips: tuple = (0.5, 1.0, 2.0)


FULL = Config()
QUICK = Config(
  directions=(200, 1000), steps=(10, 3000, 6000), panel_b_clips=(1.0, 2.0)
)


def make_setting(
  cfg: Config, k: int, clip: float | None = None, fraction: float = 1.0
) -> setting_lib.NoisyZOGDSetting:
  clip = cfg.clip if clip is None else clip
  eta = k / cfg.smoothness
  xi = (
    2
    * clip
    / (cfg.dataset_size * eta * cfg.smoothness * math.sqrt(2 * cfg.dimension))
  )
  return setting_lib.NoisyZOGDSetting(
    dimension=cfg.dimension,
    dataset_size=cfg.dataset_size,
    num_directions=k,
    step_size=eta,
    noise_std=cfg.noise_std,
    clip=clip,
    radius=cfg.radius,
    smoothing=xi,
    directional_fraction=fraction,
    assumptions=setting_lib.LossAssumptions(
      smoothness=cfg.smoothness,
      lipschitz=clip,
      strong_convexity=cfg.strong_convexity,
    ),
  )


def series(cfg: Config, k: int, clip: float | None = None) -> list[dict]:
  """Every analysis at every T for one ``(K, Delta)``."""
  rows = []
  for t in cfg.steps:
    setting = make_setting(cfg, k, clip)
    bound = hidden_state.hidden_state_bound(setting, t, cfg.delta, design=True)
    cor = hidden_state.corollary33(setting, t, cfg.delta)
    comp = hidden_state.composition_rdp(setting, t).epsilons(cfg.delta)
    pt = bound.points["standard"]
    rows.append(
      {
        "K": k,
        "clip": setting.clip,
        "T": t,
        "hidden_standard": bound.epsilon("standard"),
        "hidden_improved": bound.epsilon("improved"),
        "hidden_analysis": pt.analysis,
        "tau": pt.tau,
        "failure_probability": pt.failure_probability,
        "corollary_standard": cor.epsilon("standard"),
        "corollary_failed": cor.failed,
        "composition_standard": comp["standard"],
        "composition_improved": comp["improved"],
        "feasible": bound.check() == [],
      }
    )
  return rows


def output_perturbation(cfg: Config) -> dict:
  """At the largest tested eta, as the Fig. 1 setup does."""
  setting = make_setting(cfg, max(cfg.directions), fraction=0.0)
  return hidden_state.output_perturbation_rdp(setting).epsilons(cfg.delta)


def claims(cfg: Config, rows: list[dict], output: dict) -> dict:
  """The paper's qualitative claims, each checked on the rows."""
  by_k = {
    k: [r for r in rows if r["K"] == k and r["clip"] == cfg.clip]
    for k in cfg.directions
  }
  last = {k: v[-1] for k, v in by_k.items()}
  prev = {k: v[-2] for k, v in by_k.items()}
  sat = {
    k: abs(last[k]["hidden_standard"] / prev[k]["hidden_standard"] - 1)
    for k in cfg.directions
  }
  ks = sorted(cfg.directions)
  return {
    "converges_in_T (last two T within 1%)": all(
      s < 0.01 for s in sat.values()
    ),
    "below_composition_at_largest_T": all(
      last[k]["hidden_standard"] < last[k]["composition_standard"] for k in ks
    ),
    "larger_K_lowers_it_at_largest_T": all(
      last[a]["hidden_standard"] > last[b]["hidden_standard"]
      for a, b in zip(ks, ks[1:])
    ),
    "composition_independent_of_K": len(
      {round(last[k]["composition_standard"], 9) for k in ks}
    )
    == 1,
    "output_perturbation_weaker_than_composition_at_smallest_T": (
      output["standard"] > by_k[ks[0]][0]["composition_standard"]
    ),
    "corollary_33_never_below_numerical": all(
      r["corollary_standard"] is None
      or r["corollary_standard"] >= r["hidden_standard"] * (1 - 1e-9)
      for r in rows
    ),
    "every_bound_feasible": all(r["feasible"] for r in rows),
  }


def plot(cfg: Config, rows, output, path: str) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
  _panel_a(axes[0], cfg, rows, output)
  _panel_b(axes[1], cfg, rows)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def _panel_a(ax, cfg: Config, rows, output) -> None:
  """Panel (a): each K's hidden-state bound against composition."""
  base = [
    r for r in rows if r["K"] == cfg.directions[0] and r["clip"] == cfg.clip
  ]
  ts = [r["T"] for r in base]
  ax.plot(
    ts,
    [r["composition_standard"] for r in base],
    "k-",
    lw=2,
    label="composition (Thm 3.1), any K",
  )
  ax.axhline(
    output["standard"],
    color="gray",
    ls=":",
    lw=2,
    label=f"output perturbation (eta = {max(cfg.directions)})",
  )
  for i, k in enumerate(cfg.directions):
    mine = [r for r in rows if r["K"] == k and r["clip"] == cfg.clip]
    color = f"C{i}"
    ax.plot(
      ts,
      [r["hidden_standard"] for r in mine],
      "-o",
      ms=3,
      color=color,
      label=f"hidden state (Thm 3.2), K = {k}",
    )
    ax.plot(
      ts,
      [r["corollary_standard"] for r in mine],
      "--",
      color=color,
      lw=1,
      label=f"Cor. 3.3, K = {k}",
    )
  ax.set(
    xscale="log",
    yscale="log",
    xlabel="T",
    ylabel="epsilon",
    title=f"(a) d={cfg.dimension}, n={cfg.dataset_size}, "
    f"sigma={cfg.noise_std}, delta={cfg.delta:g}",
  )
  ax.legend(fontsize=7)


def _panel_b(ax, cfg: Config, rows) -> None:
  """Panel (b): hidden state against composition for each clip."""
  k = cfg.panel_b_directions
  for i, clip in enumerate(cfg.panel_b_clips):
    mine = [r for r in rows if r["K"] == k and r["clip"] == clip]
    ax.plot(
      [r["T"] for r in mine],
      [r["hidden_standard"] for r in mine],
      "-o",
      ms=3,
      color=f"C{i}",
      label=f"hidden state, Delta = {clip}",
    )
    ax.plot(
      [r["T"] for r in mine],
      [r["composition_standard"] for r in mine],
      "--",
      color=f"C{i}",
      label=f"standard analysis, Delta = {clip}",
    )
  ax.set(
    xscale="log",
    yscale="log",
    xlabel="T",
    ylabel="epsilon",
    title=f"(b) K = {k}: hidden state vs composition",
  )
  ax.legend(fontsize=7)


def table(rows) -> str:
  lines = [
    "| K | Delta | T | hidden (std) | hidden (improved) | T - tau | "
    "failure | Cor. 3.3 (std) | composition (std) | composition "
    "(improved) |",
    "|" + "---:|" * 10,
  ]
  for r in rows:
    window = "-" if r["hidden_analysis"] == "composition" else r["T"] - r["tau"]
    cor = (
      "-"
      if r["corollary_standard"] is None
      else f"{r['corollary_standard']:.4g}"
    )
    lines.append(
      f"| {r['K']} | {r['clip']:g} | {r['T']} | {r['hidden_standard']:.4g} "
      f"| {r['hidden_improved']:.4g} | {window} | "
      f"{r['failure_probability']:.2g} | {cor} | "
      f"{r['composition_standard']:.4g} | {r['composition_improved']:.4g} |"
    )
  return "\n".join(lines)


def main(
  out: str, cfg: Config = FULL, make_plot: bool = True, log=print
) -> dict:
  start = time.time()
  rows = []
  for k in cfg.directions:
    rows += series(cfg, k)
  for clip in cfg.panel_b_clips:
    if clip != cfg.clip or cfg.panel_b_directions not in cfg.directions:
      rows += series(cfg, cfg.panel_b_directions, clip)
  output = output_perturbation(cfg)
  checks = claims(cfg, rows, output)
  k_min = {
    k: (
      hidden_state.minimum_directions(make_setting(cfg, k), cfg.delta),
      hidden_state.minimum_directions(
        make_setting(cfg, k), cfg.delta, main_text=True
      ),
    )
    for k in cfg.directions
  }
  seconds = time.time() - start
  result = {
    "config": dataclasses.asdict(cfg),
    "rows": rows,
    "output_perturbation": output,
    "claims": checks,
    "minimum_K": k_min,
    "seconds": seconds,
  }
  with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(result, f, indent=1, default=str)
  if make_plot:
    plot(cfg, rows, output, os.path.join(out, "fig1.png"))
  text = _summary(cfg, result)
  with open(os.path.join(out, "summary.md"), "w") as f:
    f.write(text)
  log(text)
  return result


def _summary(cfg: Config, result: dict) -> str:
  """summary.md: the setting, Cor. 3.3's minimum K, the claims, the table."""
  output, k_min = result["output_perturbation"], result["minimum_K"]
  summary = [
    "# Chien, Chen & Li, Fig. 1: final-iterate epsilon against T",
    "",
    f"d = {cfg.dimension}, n = {cfg.dataset_size}, sigma = "
    f"{cfg.noise_std}, delta = {cfg.delta:g}, R = {cfg.radius}, M = "
    f"{cfg.smoothness}, m = {cfg.strong_convexity}, eta = K/M; "
    f"{result['seconds']:.0f} s.",
    "",
    "Cor. 3.3's minimum K (eq. (32) / main text): "
    + ", ".join(f"{a:.0f} / {b:.0f}" for a, b in list(k_min.values())[:1]),
    "",
    f"Output perturbation (eta = {max(cfg.directions)}): "
    f"{output['standard']:.4g} (standard), {output['improved']:.4g} "
    "(improved), for every T.",
    "",
    "Claims:",
    "",
  ]
  summary += [
    f"* {name}: {'holds' if ok else 'DOES NOT HOLD'}"
    for name, ok in result["claims"].items()
  ]
  summary += ["", table(result["rows"]), ""]
  return "\n".join(summary)
