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
  python -m experiments.run --config configs/vader_smollm2_dpzero.py \\
      --config.privacy.target_epsilon=8 --config.learning_rate=1e-2

DPZero's own step sizes, selected on public data at no privacy cost (the
public proxy as for configs/vader_smollm2_dp_zo.py, three runs per point,
mean public validation accuracy): at epsilon 2, 3e-3 (0.742; 5e-3 0.719,
1e-2 0.545); at epsilon 8, 1e-2 (0.759; 3e-3 0.561, 5e-3 0.731). By

  python -m experiments.public_selection \\
      --config configs/vader_smollm2_dpzero.py \\
      --config.public=amazon+tweets --config.public_size=256 \\
      --config.examples_per_class=128 --config.test_size=500 \\
      --config.num_steps=300 --grid learning_rate=3e-3,5e-3,1e-2 \\
      --per target_epsilon=2,8 --repeats 3

The clipping norm is not tuned. Nothing was chosen on private or test data.
"""

import ml_collections

from configs import vader_smollm2


def get_config() -> ml_collections.ConfigDict:
  config = vader_smollm2.get_config()
  config.estimator = "dpzero"
  config.estimator_kwargs = ml_collections.ConfigDict(
    {"smoothing": 1e-3, "directions": "sphere"}
  )
  config.privacy.clip = 25.0
  config.learning_rate = 3e-3  # selected on public data at epsilon 2 (above)
  return config
