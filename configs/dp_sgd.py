"""DP-SGD (first-order baseline) on digits, eps = 2.

python -m experiments.run --config configs/dp_sgd.py
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
  config = default.get_config()
  config.estimator = "dp_sgd"
  config.estimator_kwargs = ml_collections.ConfigDict({})
  config.privacy.clip = 1.0
  config.learning_rate = 0.2
  return config
