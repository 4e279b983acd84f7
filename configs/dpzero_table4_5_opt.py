"""DPZero Tables 4 and 5: DPZero fine-tuning OPT-1.3B / 2.7B / 6.7B (full
parameters) on SST-2 and BoolQ (accuracy, Table 4) and SQuAD and DROP (F1,
Table 5), epsilon in {2, 6}, delta = 1e-5, 1,000 training and 1,000 test
examples. SST-2 by default: ``--config.dataset=boolq_opt``, ``squad_opt``
or ``drop_opt``; the model size is the folder in ``model_dir``.

Hyper-parameters (DPZero Table 10): 20,000 iterations, batch 8, smoothing
1e-3, step size searched over {1e-6, 1e-7}, clipping over
{10, 50, 100, 200} (1e-6 and 50 here; choose on public data or account for
the search). DPZero clips the finite difference (its C is a DP-ZO C
divided by 2 lambda).

  python -m experiments.run --config configs/dpzero_table4_5_opt.py \\
      --config.model_dir=/models/opt-1.3b --config.data_dir=/data \\
      --config.privacy.target_epsilon=2
"""

import ml_collections

from configs import opt_llm


def get_config() -> ml_collections.ConfigDict:
  config = opt_llm.get_config()
  config.dataset = "sst2_opt"
  config.peft = "full"
  config.estimator = "dpzero"
  config.estimator_kwargs = ml_collections.ConfigDict(
    {
      "smoothing": 1e-3,
      "directions": "gaussian",
      "direction_prng": "counter",
    }
  )
  config.privacy.clip = 50.0
  config.optimizer = "sgd"
  config.learning_rate = 1e-6
  config.privacy.expected_batch_size = 8
  config.num_steps = 20_000
  config.privacy.target_epsilon = 2.0
  config.privacy.delta = 1e-5
  return config
