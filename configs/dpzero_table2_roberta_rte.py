"""DPZero Table 2, RTE column: DPZero fine-tuning RoBERTa-large, 512
examples per class, (2, 1e-5)-DP (``--config.privacy.target_epsilon=6`` for the
other row); Table 8's hyper-parameters (``dpzero_table2_roberta_fewshot``).

MeZO's prompt and label words (``medium_models/run_fewshot.sh``): the MNLI
template ``premise?<mask>, hypothesis``, Yes (entailment) / No
(not_entailment), and 256 tokens (its ``--max_seq_len 256``). The test set
is GLUE's 277 dev pairs, as in LM-BFF. Needs GLUE's ``RTE/{train,dev}.tsv``
under ``data_dir`` and a RoBERTa-large safetensors folder:

  python -m experiments.run --config configs/dpzero_table2_roberta_rte.py \
      --config.data_dir=/data/original --config.model_dir=/models/roberta-large
"""

from configs import dpzero_table2_roberta_fewshot


def get_config():
  return dpzero_table2_roberta_fewshot.get_config("rte")
