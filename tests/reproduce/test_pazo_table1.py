"""PAZO Table 1 analog: its public-only splits and its report (fast)."""

import numpy as np
import pytest

from experiments.reproductions import pazo_table1
from experiments.reproductions import pazo_table1_report as report
from zoprivacy.data import loaders
from zoprivacy.data import splits as splits_lib


def _info(smoke, methods, epsilons, done=None):
  budget = pazo_table1.BUDGETS["fast"]
  expected = len(methods) * len(epsilons) * len(budget.seeds)
  return report.Info(
    mode="fast" if smoke else "full",
    smoke=smoke,
    budget=budget,
    delta=1e-5,
    epsilons=epsilons,
    methods=methods,
    split="test split",
    sigma={(m, e): 1.0 / e for m in methods for e in epsilons},
    grids={m: pazo_table1.METHODS[m][2] for m in methods},
    seconds=1.0,
    done=expected if done is None else done,
    expected=expected,
    command="python -m experiments.reproduce pazo_table1",
  )


def _results(methods, epsilons, acc):
  return {
    (m, e): [{"accuracy": acc(m, e), "epsilon": 0.99 * e}]
    for m in methods
    for e in epsilons
  }


def test_epsilon_grid_is_the_papers():
  assert pazo_table1.EPSILONS == (0.1, 0.5, 1.0, 2.0, 3.0)
  assert pazo_table1.DELTA == 1e-5
  assert len(pazo_table1.BUDGETS["full"].seeds) >= 3


@pytest.mark.parametrize("smoke", [True, False])
def test_smoke_mode_gives_no_verdict(tmp_path, smoke):
  methods, eps = tuple(pazo_table1.METHODS), pazo_table1.EPSILONS
  # PAZO flat and above DPZero; first-order methods fall as epsilon shrinks.
  acc = lambda m, e: (
    0.7 if m in report.PAZO else 0.4 if m == "DPZero" else 0.5 + 0.05 * e
  )
  chosen = {
    (m, e): (
      pazo_table1.METHODS[m][2][0],
      {s: 0.5 for s in pazo_table1.METHODS[m][2]},
    )
    for m in methods
    for e in eps
  }
  report.write(
    str(tmp_path),
    _info(smoke, methods, eps),
    chosen,
    _results(methods, eps, acc),
  )
  table = (tmp_path / "table.md").read_text()
  if smoke:
    assert report.SMOKE in table and "HOLD" not in table
  else:
    assert report.SMOKE not in table
    assert table.count("HOLDS") == 3 and "DOES NOT HOLD" not in table
  assert "70.0 ± 0.0 (n=1)" in table
  assert (tmp_path / "table.png").stat().st_size > 1000
  assert "**50.0**" in (tmp_path / "selection.md").read_text()


def test_partial_grid_is_marked_and_gives_no_verdict(tmp_path):
  methods, eps = tuple(pazo_table1.METHODS), pazo_table1.EPSILONS
  results = _results(methods, eps, lambda m, e: 0.5)
  results["GEP", 3.0] = []
  report.write(str(tmp_path), _info(False, methods, eps, done=44), {}, results)
  table = (tmp_path / "table.md").read_text()
  assert "PARTIAL: 44 of 45" in table and "HOLD" not in table
  assert "| GEP |" in table and "—" in table


def test_mean_std_over_seeds():
  mean, std = report.mean_std([0.70, 0.72, 0.74])
  assert mean == pytest.approx(72.0) and std == pytest.approx(2.0)


def test_selection_data_are_public_only():
  try:
    s = pazo_table1.data.splits()
  except loaders.MissingDataError as e:
    pytest.skip(str(e))
  # 4% public in expectation (each image by its own keyed coin): within 6
  # binomial standard deviations of 2,400.
  assert len(s["public"]) + len(s["private"]) == 60000
  assert abs(len(s["public"]) - 2400) <= 6 * np.sqrt(2400 * 0.96)
  counts = np.bincount(s["public_val"].labels, minlength=10)
  assert (counts == pazo_table1.data.VAL_PER_CLASS).all()
  assert len(s["public_train"]) + len(s["public_val"]) == len(s["public"])
  # No image is in two of private / public-train / public-validation.
  for a, b in (
    ("public_train", "public_val"),
    ("public_train", "private"),
    ("public_val", "private"),
  ):
    assert not splits_lib.find_overlap(s[a].inputs, s[b].inputs).size, (
      a,
      b,
    )
