"""DPZero Table 2, SST-5 column: DPZero fine-tuning RoBERTa-large, 512
examples per class, (2, 1e-5)-DP (``--config.privacy.target_epsilon=6`` for the
other row); Table 8's hyper-parameters (``dpzero_table2_roberta_fewshot``).

MeZO's prompt and label words (``medium_models/run_fewshot.sh``):
``<sentence> It was<mask>.``, terrible / bad / okay / good / great; 128
tokens (its ``--first_sent_limit 110`` keeps the prompt's tail, as
``fit_around_mask`` does). The test set is 1,000 of SST-5's 2,210 test
sentences (``test_size``). Needs LM-BFF's ``sst-5/{train,test}.csv`` under
``data_dir`` and a RoBERTa-large safetensors folder:

  python -m experiments.run --config configs/dpzero_table2_roberta_sst5.py \
      --config.data_dir=/data/original --config.model_dir=/models/roberta-large
"""

from configs import dpzero_table2_roberta_fewshot


def get_config():
  return dpzero_table2_roberta_fewshot.get_config("sst5")
