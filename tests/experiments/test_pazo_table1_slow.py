"""The PAZO Table 1 analog command end to end on a tiny budget (slow: ~3 min).

Run with ``python -m pytest -m slow``; needs ``dataset-fashion-mnist``.
"""

import pytest

from zoprivacy.data import loaders

METHODS = ["DP-SGD", "DPZero", "PAZO-M"]


@pytest.mark.slow
@pytest.mark.integration
def test_pazo_table1_fast_mode_writes_table_and_plot(tmp_path):
  try:
    loaders.load_fashion_mnist()
  except loaders.MissingDataError as e:
    pytest.skip(str(e))
  # pylint: disable-next=g-import-not-at-top
  from experiments.reproductions import pazo_table1

  out = pazo_table1.main(str(tmp_path), "fast", METHODS)
  table = (tmp_path / "table.md").read_text()
  assert "| PAZO-M |" in table
  assert (tmp_path / "table.png").stat().st_size > 1000
  # A smoke run gives no verdict on the paper's claims.
  assert "smoke run: no verdict" in table and "HOLD" not in table
  assert out["complete"]
  seeds = pazo_table1.BUDGETS["fast"].seeds
  for method in METHODS:
    assert set(out["accuracy"][method]) == set(pazo_table1.EPSILONS)
    assert all(len(v) == len(seeds) for v in out["accuracy"][method].values())
    for e, lr in out["step_size"][method].items():
      assert lr in pazo_table1.METHODS[method][2], (method, e)
  assert "| PAZO-M |" in (tmp_path / "selection.md").read_text()
  # A second call is served from the cache.
  again = pazo_table1.main(str(tmp_path), "fast", METHODS)
  assert again["accuracy"] == out["accuracy"] and again["seconds"] < 30
