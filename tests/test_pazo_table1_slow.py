"""The PAZO Table 1 analog command end to end on a tiny budget (slow: ~2 min).

Run with ``python -m pytest -m slow``; needs ``dataset-fashion-mnist``.
"""

import pytest

from zoprivacy.data import loaders


@pytest.mark.slow
def test_pazo_table1_fast_mode_writes_table_and_plot(tmp_path):
  try:
    loaders.load_fashion_mnist()
  except loaders.MissingDataError as e:
    pytest.skip(str(e))
  from experiments.reproductions import pazo_table1  # pylint: disable=g-import-not-at-top
  out = pazo_table1.main(str(tmp_path), "fast", ["DP-SGD", "DPZero", "PAZO-M"])
  table = (tmp_path / "table.md").read_text()
  assert "| PAZO-M |" in table and (tmp_path / "table.png").stat().st_size > 1000
  for method in ("DP-SGD", "DPZero", "PAZO-M"):
    assert set(out["accuracy"][method]) == set(pazo_table1.EPSILONS)
  # A second call is served from the cache.
  again = pazo_table1.main(str(tmp_path), "fast", ["DP-SGD", "DPZero", "PAZO-M"])
  assert again["accuracy"] == out["accuracy"] and again["seconds"] < 30
