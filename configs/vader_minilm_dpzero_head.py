"""DPZero on the linear head only over frozen all-MiniLM-L6-v2 features
(VADER movie snippets, 512 per class, (2, 1e-5)-DP): the zeroth-order
counterpart of ``vader_minilm_head_dpsgd.py`` (same features, head, data,
sampling and budget), isolating what zeroth-order estimation costs on a
770-parameter problem. Features are precomputed once (frozen public weights).

The step size was selected on public data (``amazon+tweets``,
``experiments/public_selection.py``, step sizes 1e-3 ... 0.1, 3 repeats),
separately for each epsilon: 3e-3 at epsilon = 1, 1e-2 at 2 (the default
here) and at 4. C = 5 is consistent with the public finite differences at
initialisation (90th percentile 4.6). No private example was read, so
epsilon is the whole cost (``benchmarks/results/vader_minilm.md``).

  python -m experiments.run --config configs/vader_minilm_dpzero_head.py
"""

import ml_collections

from configs import vader_minilm_dpzero_full


def get_config() -> ml_collections.ConfigDict:
  config = vader_minilm_dpzero_full.vader_base()
  config.peft = "head"
  config.precompute_features = True
  config.privacy.clip = 5.0
  # Selected on public data at epsilon = 2 (module docstring).
  config.learning_rate = 1e-2
  return config
