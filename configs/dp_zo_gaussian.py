"""DP-ZO (Tang et al. Alg. 1) with Gaussian noise on digits, eps = 2. Clips the raw loss difference: C = 2e-3 here equals the default's DPZero finite-difference clip 1.0 at smoothing 1e-3.

python -m experiments.run --config configs/dp_zo_gaussian.py
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
  config.privacy.mechanism = "gaussian"
  config.learning_rate = 0.02
  return config
