"""The reproduction commands: fast dpzero_quadratic grid, rates, accounting."""

import json
import math
import os

import pytest
from scipy import optimize, stats

from experiments import reproduce
from experiments.reproductions import (
  dpzero_quadratic,
  dpzero_rates,
  dpzo_accounting,
)

# DPGD-0th must be at least this factor worse than DPZero (measured: 0.2087
# vs 0.1531, a ratio of 1.36, with the fixed seeds of the FAST grid).
ORDERING_MARGIN = 1.2


def test_fast_grid_dpgd_zeroth_worse_than_dpzero_rank_log_d(tmp_path):
  out = str(tmp_path)
  assert (
    reproduce.main(["dpzero_quadratic", "--fast", "--out", out, "--no-plots"])
    == 0
  )
  with open(os.path.join(out, "best.json")) as f:
    best = json.load(f)
  dpzero = best["dpzero|rank_log_d|500"]["test_grad_norm"][0]
  dpgd0 = best["dpgd_zeroth|rank_log_d|500"]["test_grad_norm"][0]
  assert dpgd0 >= ORDERING_MARGIN * dpzero, (dpgd0, dpzero)
  assert 0.1 < dpzero < 0.2  # x_0 = 0 has test gradient norm ~1.28
  # Resumable: a second invocation recomputes nothing.
  again = dpzero_quadratic.run(dpzero_quadratic.FAST, out, log=lambda *_: None)
  assert again["compute_seconds"] == 0.0
  assert len(again["records"]) == 2


def _gdp_noise_multiplier(steps, eps=2.0, delta=1e-6, sensitivity=2.0):
  """Exact: T Gaussian releases = one Gaussian with mu = sens sqrt(T)/sigma."""

  def excess(mu):
    return (
      stats.norm.cdf(-eps / mu + mu / 2)
      - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
      - delta
    )

  return sensitivity * math.sqrt(steps) / optimize.brentq(excess, 1e-3, 50.0)


@pytest.mark.parametrize("steps", [10, 5120])
def test_quadratic_noise_calibration_matches_closed_form(steps, tmp_path):
  sig = dpzero_quadratic.noise_multipliers([steps], str(tmp_path / "c.json"))
  got = sig[steps]["noise_multiplier"]
  exact = _gdp_noise_multiplier(steps)
  assert exact * 0.999 <= got <= exact * 1.006
  assert sig[steps]["epsilon"] <= 2.0
  # DPZero Alg. 2: 4 sqrt(2 T log(e + eps/delta)) / eps, about 2.4x larger.
  alg2 = 4 * math.sqrt(2 * steps * math.log(math.e + 2.0 / 1e-6)) / 2.0
  assert sig[steps]["alg2_advanced_composition"] == pytest.approx(alg2)


def test_dpzo_table16_gaussian():
  rows = dpzo_accounting.gaussian_rows(calibrate=True, log=lambda *_: None)
  by_eps = {r["target_epsilon"]: r for r in rows}
  # Reference values (dp_accounting 0.6.0, interval 1e-4).
  for eps, want in ((0.5, 0.5004), (1.0, 0.9988), (4.0, 3.9952)):
    assert by_eps[eps]["epsilon_of_paper_sigma"] == pytest.approx(
      want, abs=2e-4
    )
    assert by_eps[eps]["epsilon_remove"] >= by_eps[eps]["epsilon_add"]
    # Calibrated sigma agrees with the paper's Table 16 to 0.5%.
    assert by_eps[eps]["calibrated_sigma"] == pytest.approx(
      by_eps[eps]["paper_sigma"], rel=5e-3
    )
    assert by_eps[eps]["calibrated_epsilon"] <= eps


def test_pure_dp_prv_of_one_step_is_eps0():
  assert dpzo_accounting.pure_dp_prv_epsilon(0.5, 1, 1e-5) == pytest.approx(
    0.5, abs=1e-3
  )


@pytest.mark.slow
def test_dpzo_laplace_rows():
  rows = dpzo_accounting.laplace_rows(log=lambda *_: None)
  for r in rows:
    assert r["pure_epsilon_check"] == pytest.approx(r["target_epsilon"])
    # Tighter accountants give a smaller epsilon for the same noise.
    assert (
      r["epsilon_laplace_pld"] < r["epsilon_pure_dp_prv"] < r["target_epsilon"]
    )
    assert r["b_approx"] < r["b_pure"]
    assert r["b_approx_epsilon"] <= r["target_epsilon"]


def test_table1_predicted_slopes():
  dims = dpzero_quadratic.PAPER_DIMS
  import numpy as np

  def slope(method, mode):
    return dpzero_quadratic.loglog_slope(
      dims,
      [np.sqrt(dpzero_rates.predicted_sq_rate(method, mode, d)) for d in dims],
    )

  assert slope("dpgd_zeroth", "rank_d") == pytest.approx(0.75)
  assert slope("dp_gd", "rank_d") == pytest.approx(0.25)
  assert slope("dp_gd", "rank_log_d") < 0.06
  assert slope("dpzero", "rank_log_d") < 0.15


def test_fast_modes_print_no_verdict_and_rates_refuse_fast(tmp_path, capsys):
  out = str(tmp_path / "q")
  reproduce.main(["dpzero_quadratic", "--fast", "--out", out, "--no-plots"])
  with open(os.path.join(out, "summary.md")) as f:
    summary = f.read()
  assert "smoke run: no verdict" in summary
  assert "HELD" not in summary
  with pytest.raises(SystemExit, match="no --fast mode"):
    reproduce.main(["dpzero_rates", "--fast"])
  with pytest.raises(SystemExit, match="fewer than two"):
    reproduce.main(["dpzero_rates", "--source", out, "--out", str(tmp_path)])
