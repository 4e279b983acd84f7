"""DP-ZO Table 2: DP-ZO (Gaussian) on SQuAD across OPT sizes (1.3B to 66B),
LoRA (default) or full fine-tuning (``--config.peft=full``), (1, 1e-5)-DP,
1,000 training examples. The model size is the folder in ``model_dir``
(facebook/opt-1.3b, -2.7b, -6.7b, -13b, -30b, -66b).

Hyper-parameters as Table 1 (DP-ZO Table 16): 75,000 steps, batch 16, clip
0.05, phi 0.01; the learning rate of Table 17 is searched per size (2e-5
here for LoRA; full fine-tuning uses smaller steps, e.g. 1e-6).

  python -m experiments.run --config configs/dpzo_table2_opt_squad.py \\
      --config.model_dir=/models/opt-1.3b --config.data_dir=/data
  python -m experiments.run --config configs/dpzo_table2_opt_squad.py \\
      --config.model_dir=/models/opt-2.7b --config.data_dir=/data \\
      --config.peft=full --config.learning_rate=1e-6
"""

import ml_collections

from configs import dpzo_table1_opt13b_lora


def get_config() -> ml_collections.ConfigDict:
  config = dpzo_table1_opt13b_lora.get_config()
  config.dataset = "squad_opt"
  config.privacy.target_epsilon = 1.0
  return config
