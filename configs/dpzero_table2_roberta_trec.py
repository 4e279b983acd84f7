"""DPZero Table 2, TREC column: DPZero fine-tuning RoBERTa-large, 512
examples per class, (2, 1e-5)-DP (``--config.privacy.target_epsilon=6`` for the
other row); Table 8's hyper-parameters (``dpzero_table2_roberta_fewshot``).

MeZO's prompt and label words (``medium_models/run_fewshot.sh``):
``<mask>: <question>``, Description / Entity / Expression / Human /
Location / Number; 128 tokens. TREC's ABBR class has 86 training
questions: as in LM-BFF's k-shot files, all 86 are taken, so the training
set has 5 * 512 + 86 = 2,646 examples (the sampling rate and epsilon use
that count). The test set is TREC's 500 questions. Needs LM-BFF's
``trec/{train,test}.csv`` (or TREC's ``train_5500.label`` and
``TREC_10.label``) under ``data_dir`` and a RoBERTa-large safetensors
folder:

  python -m experiments.run --config configs/dpzero_table2_roberta_trec.py \
      --config.data_dir=/data/original --config.model_dir=/models/roberta-large
"""

from configs import dpzero_table2_roberta_fewshot


def get_config():
  return dpzero_table2_roberta_fewshot.get_config("trec")
