"""Zero-shot SmolLM2-135M-Instruct on VADER movie-review snippets: MeZO's
prompt "<sentence> It was" scored by the label words " terrible" / " great"
on the 1,000 test snippets, nothing trained.

Runs through the runner as one non-private MeZO step at learning rate 0
(the project's control: the parameters do not move), so the report's test
accuracy, before and after that step, is the pretrained model's. With LoRA
(B starts at zero) the model is exactly the pretrained one. No private
example influences the number: epsilon is reported as infinite only
because the estimator is the non-private one.

  python -m experiments.run --config configs/vader_smollm2_zero_shot.py
"""

import ml_collections

from configs import vader_smollm2_mezo


def get_config() -> ml_collections.ConfigDict:
  config = vader_smollm2_mezo.get_config()  # non-private, shuffled batches
  config.learning_rate = 0.0
  config.num_steps = 1
  config.eval_every = 0
  return config
