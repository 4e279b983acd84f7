"""DP-ZO (Tang et al. 2024, Alg. 1; Gaussian) on SmolLM2-135M-Instruct and
VADER movie snippets at (2, 1e-5)-DP: the DP-ZO Table 1 pattern on a 135M
causal LM (configs/vader_smollm2.py has the setting). Poisson batches of
expected size 32 from the 1,024 private examples, the raw loss difference
clipped, exact discrete Gaussian noise on the sum.

  python -m experiments.run --config configs/vader_smollm2_dp_zo.py
  python -m experiments.run --config configs/vader_smollm2_dp_zo.py \\
      --config.privacy.target_epsilon=8 --config.learning_rate=1e-2

The step sizes were selected on public data at no privacy cost: the public
proxy (out-of-distribution Amazon and tweet snippets) at 300 steps and 128
examples per class, each point run three times with fresh noise and scored
by its mean public validation accuracy. At epsilon 2: 5e-3 (0.741; 3e-3
0.679, 1e-2 0.587); at epsilon 8: 1e-2 (0.757; 3e-3 0.552, 5e-3 0.687). By

  python -m experiments.public_selection \\
      --config configs/vader_smollm2_dp_zo.py \\
      --config.public=amazon+tweets --config.public_size=256 \\
      --config.examples_per_class=128 --config.test_size=500 \\
      --config.num_steps=300 --grid learning_rate=3e-3,5e-3,1e-2 \\
      --per target_epsilon=2,8 --repeats 3

(An earlier selection with one run per point chose 3e-3 at epsilon 2;
docs/results/vader_smollm2.md reports the private runs at both.)
No private or test example was read for it. The clipping norm (0.05) is the
base config's, not tuned. docs/results/vader_smollm2.md has the runs.
"""

import ml_collections

from configs import vader_smollm2


def get_config() -> ml_collections.ConfigDict:
  config = vader_smollm2.get_config()  # DP-ZO, Gaussian, epsilon 2
  config.learning_rate = 5e-3  # selected on public data at epsilon 2 (above)
  return config
