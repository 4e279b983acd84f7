"""DP-ZO on a tiny random OPT and a synthetic SQuAD task, scored as DP-ZO
and MeZO score SQuAD: F1 and exact match of greedy answers (the key/value
cache decoder), with SQuAD's normalization, the best over the gold answers.

  python -m experiments.run --config configs/tiny_opt_squad.py

``tests/fixtures/tiny_opt`` is a random-weight OPT (2 layers, width 64, 128
positions; ``tests/fixtures/make_tiny_opt.py``); the data,
``tests/fixtures/squad_synthetic/squad/{train,dev}-v1.1.json``, is in the
upstream SQuAD v1.1 JSON format (``make_squad_synthetic.py`` says what the
task is). A check of the whole generation path in well under a minute, not
a paper table: a random model answers nothing right, so F1 and EM stay near
0 over these few steps. Answers are at most ``max_new_tokens`` = 16 tokens
(MeZO's 50 would leave the 128-position model too little prompt).
"""

import pathlib

import ml_collections

from configs import dpzo_table2_opt_squad

_FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def get_config() -> ml_collections.ConfigDict:
  # DP-ZO Table 2's estimator (Gaussian, raw loss difference, phi 0.01,
  # counter directions, LoRA), scaled to the fixture.
  config = dpzo_table2_opt_squad.get_config()
  config.model_dir = str(_FIXTURES / "tiny_opt")
  config.data_dir = str(_FIXTURES / "squad_synthetic")
  config.num_train = 64
  config.num_eval = 16
  config.max_length = 96  # prompt and answer (the prompts are <= 81 tokens)
  config.max_new_tokens = 16
  config.eval_batch_size = 8
  config.privacy.expected_batch_size = 16
  config.num_steps = 20
  config.privacy.target_epsilon = 8.0
  config.privacy.clip = 0.2
  config.learning_rate = 1e-2
  config.eval_every = 10
  config.checkpoint_every = 0
  return config
