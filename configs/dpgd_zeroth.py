"""DPGD-0th (DPZero Alg. 1, vector noise) on digits, eps = 2: the baseline that shows why scalar noise matters.

python -m experiments.run --config configs/dpgd_zeroth.py
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
  config = default.get_config()
  config.estimator = "dpgd_zeroth"
  config.estimator_kwargs = ml_collections.ConfigDict(
    {"smoothing": 1e-3, "directions": "sphere"}
  )
  config.privacy.clip = 1.0
  config.learning_rate = 0.02
  return config
