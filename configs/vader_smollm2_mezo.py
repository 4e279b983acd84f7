"""MeZO (non-private) on SmolLM2-135M-Instruct and VADER movie snippets:
the upper reference of the DP-ZO Table 1 pattern (configs/vader_smollm2.py
has the setting). Shuffled batches of 32, no clipping, no noise.

  python -m experiments.run --config configs/vader_smollm2_mezo.py
"""

import ml_collections

from configs import vader_smollm2


def get_config() -> ml_collections.ConfigDict:
  config = vader_smollm2.get_config()
  config.estimator = "mezo"
  config.estimator_kwargs = ml_collections.ConfigDict(
    {"smoothing": 1e-3, "directions": "gaussian"}
  )
  config.privacy.target_epsilon = None
  config.privacy.sampling = "shuffle"
  config.learning_rate = 1e-2
  return config
