"""DP-ZO with Laplace noise on digits: noise calibrated for (eps, delta) = (2, 1e-5) by PLD; the report also prints the pure epsilon of DP-ZO Thm 3.1.

python -m experiments.run --config configs/dp_zo_laplace.py
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
  config = default.get_config()
  config.estimator = "dp_zo"
  config.estimator_kwargs = ml_collections.ConfigDict(
    {
      "smoothing": 1e-3,
      "clip_target": "raw_difference",
    }
  )
  config.privacy.clip = 2e-3
  config.privacy.mechanism = "laplace"
  config.learning_rate = 0.02
  return config
