"""DPZero (Zhang et al. 2024, Alg. 2: scalar noise on the clipped finite
difference) on SmolLM2-135M-Instruct and VADER movie snippets at
(2, 1e-5)-DP, beside DP-ZO (configs/vader_smollm2_dp_zo.py) in the same
setting (configs/vader_smollm2.py). The finite difference
(f(x + l u) - f(x - l u)) / (2 l) is clipped at 25: with l = 1e-3 that is
DP-ZO's raw difference clipped at 0.05, so the two differ only where their
papers do (DPZero's directions on the sphere of radius sqrt(d), its noise on
the finite difference). Poisson batches of expected size 32, exact discrete
Gaussian noise.

  python -m experiments.run --config configs/vader_smollm2_dpzero.py

The step size 3e-3 is the one selected on public data for DP-ZO at
epsilon 2 (configs/vader_smollm2_dp_zo.py has the selection; the clipping
norms are the same scale), not a selection of DPZero's own; the clipping
norm is not tuned. Nothing was chosen on private or test data.
"""

import ml_collections

from configs import vader_smollm2


def get_config() -> ml_collections.ConfigDict:
  config = vader_smollm2.get_config()
  config.estimator = "dpzero"
  config.estimator_kwargs = ml_collections.ConfigDict(
    {"clip": 25.0, "smoothing": 1e-3, "directions": "sphere"}
  )
  config.learning_rate = 3e-3  # DP-ZO's, selected on public data
  return config
