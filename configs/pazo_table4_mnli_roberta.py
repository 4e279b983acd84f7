"""PAZO Table 4: prompt-based fine-tuning of RoBERTa-base on MNLI, DPZero row, eps = 2.

Setting (PAZO App. C.1, following MeZO / DPZero): 512 MNLI training pairs per
class (1,536 private examples), the MeZO template ``premise?<mask>,
hypothesis`` with label words Yes / Maybe / No, 100 SNLI training pairs per
class as out-of-distribution public data; delta = 1/#train. Hyper-parameters:
smoothing 1e-3 (Table 7), q = 5 (Table 8), 200 epochs at batch 64 (App. C.3)
= 4,800 steps; C = 100 and step size 1e-5 are points of the Table 10 grids
(C in {10, ..., 250}, step size in {1e-6, ..., 5e-5}); the selected points are
not reported. All parameters are fine-tuned (``peft="full"``). Evaluated on
1,000 matched-dev pairs (the MeZO protocol); sequences of 256 tokens.

Needs the GLUE MNLI and SNLI files under ``data_dir`` and a RoBERTa-base
safetensors folder (config.json, model.safetensors, tokenizer.json):

  python -m experiments.run --config configs/pazo_table4_mnli_roberta.py \
      --config.data_dir=/data --config.model_dir=/models/roberta-base
"""

import ml_collections

from configs import dpzero_table2_roberta_fewshot


def get_config() -> ml_collections.ConfigDict:
  config = dpzero_table2_roberta_fewshot.get_config()  # RoBERTa prompt task
  config.dataset = "mnli"
  config.max_length = 256
  config.public = "snli"
  config.public_per_class = 100

  config.estimator_kwargs = ml_collections.ConfigDict(
    {
      "smoothing": 1e-3,
      "directions": "gaussian",
    }
  )
  config.privacy.clip = 100.0
  config.privacy.num_queries = 5
  config.learning_rate = 1e-5
  config.num_steps = 4_800  # 200 epochs of 1,536 examples
  config.privacy.delta = 1.0 / 1_536
  config.eval_every = 1_000
  config.checkpoint_every = 1_000
  return config
