"""The notebooks run top to bottom (code cells executed in one namespace)."""

import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("name", ["quickstart.ipynb"])
def test_notebook_runs(name, capsys):
  with open(os.path.join(ROOT, "notebooks", name)) as f:
    nb = json.load(f)
  namespace = {}
  for cell in nb["cells"]:
    if cell["cell_type"] == "code":
      exec(compile("".join(cell["source"]), f"{name}", "exec"), namespace)  # pylint: disable=exec-used
  # The quickstart learns under (2, 1e-5)-DP: well above chance (0.1).
  assert namespace["accuracy"] > 0.5
  assert namespace["epsilon"] <= 2.0
