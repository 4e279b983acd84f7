"""Figures 1-3 of DPZero from the best values."""

from __future__ import annotations

import os

from experiments.reproductions import quadratic
from experiments.reproductions.dpzero_quadratic.grid import (
  DELTA,
  EPSILON,
  GridConfig,
)


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
