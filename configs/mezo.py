"""MeZO (non-private baseline) on digits: same model and data as the default.

python -m experiments.run --config configs/mezo.py
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
  config = default.get_config()
  config.estimator = "mezo"
  config.estimator_kwargs = ml_collections.ConfigDict(
    {"smoothing": 1e-3, "directions": "gaussian"}
  )
  config.learning_rate = 0.001
  return config
