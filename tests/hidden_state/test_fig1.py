"""The Fig. 1 reproduction command: claims, and its runtime."""

import json
import os
import time

import pytest

from experiments import reproduce


def _run(args, out):
  assert reproduce.main(["hidden_state_fig1", "--out", str(out)] + args) == 0
  with open(os.path.join(out, "results.json")) as f:
    return json.load(f)


@pytest.mark.slow  # a figure reproduction, as the others: ~7 s
def test_quick_fig1_claims_hold(tmp_path):
  result = _run(["--quick", "--no-plots"], tmp_path)
  print(result["claims"])
  assert all(result["claims"].values()), result["claims"]
  assert os.path.exists(os.path.join(tmp_path, "summary.md"))


@pytest.mark.slow
def test_full_fig1_runs_in_under_five_minutes(tmp_path):
  start = time.time()
  result = _run([], tmp_path)
  seconds = time.time() - start
  print(f"hidden_state_fig1: {seconds:.1f} s")
  assert seconds < 300
  assert all(result["claims"].values()), result["claims"]
  assert os.path.exists(os.path.join(tmp_path, "fig1.png"))


@pytest.mark.slow
def test_quick_sweep_trains_and_reports_three_epsilons(tmp_path):
  assert (
    reproduce.main(
      [
        "hidden_state_sweep",
        "--quick",
        "--no-plots",
        "--out",
        str(tmp_path),
      ]
    )
    == 0
  )
  with open(os.path.join(tmp_path, "results.json")) as f:
    result = json.load(f)
  assert result["condition_ratio"] == pytest.approx(0.5)
  for row in result["rows"]:
    assert 0.0 <= row["test_accuracy"] <= 1.0
    assert row["hidden_state"]["improved"] <= (
      row["composition"]["improved"] * (1 + 1e-9)
    )
