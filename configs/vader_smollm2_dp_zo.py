"""DP-ZO (Tang et al. 2024, Alg. 1; Gaussian) on SmolLM2-135M-Instruct and
VADER movie snippets at (2, 1e-5)-DP: the DP-ZO Table 1 pattern on a 135M
causal LM (configs/vader_smollm2.py has the setting). Poisson batches of
expected size 32 from the 1,024 private examples, the raw loss difference
clipped, exact discrete Gaussian noise on the sum.

  python -m experiments.run --config configs/vader_smollm2_dp_zo.py
  python -m experiments.run --config configs/vader_smollm2_dp_zo.py \\
      --config.target_epsilon=8 --config.learning_rate=<epsilon 8's>

The step size (1e-3) and clipping norm (0.05) are the base config's
starting values, not tuned: no selection on public data was run for them,
and none on the private data. docs/results/vader_smollm2.md has a short run
of this config beside zero-shot.
"""

import ml_collections

from configs import vader_smollm2


def get_config() -> ml_collections.ConfigDict:
  config = vader_smollm2.get_config()  # DP-ZO, Gaussian, epsilon 2
  return config
