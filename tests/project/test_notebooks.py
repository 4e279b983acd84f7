"""The notebooks run top to bottom (code cells executed in one namespace)."""

import json
import os

import pytest

ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


@pytest.mark.parametrize("name", ["quickstart.ipynb"])
def test_notebook_runs(name, capsys):
  with open(os.path.join(ROOT, "notebooks", name)) as f:
    nb = json.load(f)
  namespace = {}
  for cell in nb["cells"]:
    if cell["cell_type"] == "code":
      exec(compile("".join(cell["source"]), f"{name}", "exec"), namespace)  # pylint: disable=exec-used
  # The quickstart learns under (2, 1e-5)-DP: well above chance (0.1). Its
  # noise and batches are secret, so the accuracy varies from run to run
  # (about 0.73 +- 0.05 over 12 runs): 0.5 is more than 4 standard deviations
  # below the mean.
  assert namespace["accuracy"] > 0.5
  assert namespace["epsilon"] <= 2.0
  # It shows the private path: secret noise, and the plan it printed.
  plan = namespace["plan"]
  assert plan.is_private and plan.noise_kind == "discrete"
  assert plan.describe() in capsys.readouterr().out
