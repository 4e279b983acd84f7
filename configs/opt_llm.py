"""Shared base of the OPT fine-tuning configs (DP-ZO and DPZero tables).

Not a table itself: the per-table configs set the estimator, privacy and
schedule. Every field here is a default a table config may override:
``model_dir`` is a Hugging Face OPT folder (``config.json``,
``model.safetensors`` or its sharded index, ``tokenizer.json`` or
``vocab.json`` + ``merges.txt``), ``data_dir`` the task files
(``experiments/tasks/llm.py`` lists them). With either missing, the run
stops before any work and names the files to download.

Directions are Gaussian and drawn by the counter hash (``direction_prng=
'counter'``, the one direction function whose slices the layer-wise path
regenerates); 1,000 training and 1,000 evaluation examples as in MeZO.
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
  config = default.get_config()
  config.dataset = "squad_opt"
  config.model_dir = ""  # e.g. a download of facebook/opt-13b
  # "opt", "llama" or "mistral": read from model_dir's config.json; this
  # field (default: guessed from the folder's name, else OPT) only names
  # the family when the folder has no config.json yet.
  config.model_family = ""
  config.data_dir = ""
  config.num_train = 1000
  config.num_eval = 1000
  config.max_length = 256
  config.peft = "lora"
  config.lora_rank = 8
  config.lora_alpha = 16.0
  config.lora_targets = r"self_attn/(q_proj|v_proj)/kernel$"
  config.num_prefix_tokens = 5  # peft="prefix": MeZO's prefix length
  # The stored dtype of the pretrained weights: "float32", "bfloat16" or
  # "float16" (half the memory; MeZO's --load_float16). With peft="full"
  # the trained weights stay in it too (no float32 copy): perturbed in
  # float32 one layer at a time, updated in float32 and stored
  # stochastically rounded. Adapters (lora, prefix) are float32.
  config.param_dtype = "float32"
  # The layer-wise step (experiments/run/layerwise_run.py): the perturbation
  # is added inside the layer scan, so a step holds no extra copy of the
  # parameters. Plain SGD with mezo, dpzero or dp_zo; set False for others.
  config.layerwise = True
  config.privacy.noise = "exact"  # exact discrete noise on the quantized scalar
  config.eval_every = 0
  config.checkpoint_every = 1000
  return config
