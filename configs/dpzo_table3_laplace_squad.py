"""DP-ZO Table 3: pure epsilon-DP with DP-ZO (Laplace), OPT-13B with LoRA,
SQuAD, 1,000 training examples, epsilon in {4, 10, 15}.

The Laplace scale is calibrated for ``target_epsilon`` with the PLD (add /
remove, delta = 1e-5); the report also prints the pure epsilon of DP-ZO
Thm 3.1 (basic composition of the subsampled Laplace mechanism), the
quantity the table states. Other hyper-parameters as Table 1.

  python -m experiments.run --config configs/dpzo_table3_laplace_squad.py \\
      --config.model_dir=/models/opt-13b --config.data_dir=/data \\
      --config.privacy.target_epsilon=4
"""

import ml_collections

from configs import dpzo_table1_opt13b_lora


def get_config() -> ml_collections.ConfigDict:
  config = dpzo_table1_opt13b_lora.get_config()
  config.privacy.mechanism = "laplace"
  config.privacy.target_epsilon = 4.0
  return config
