"""Offline Fashion-MNIST analog of the PAZO/DPZero image settings: DPZero at eps 2.

Real Fashion-MNIST (60k/10k, Debian package ``dataset-fashion-mnist``) with the
small CNN, Poisson-sampled batches of expected size 256, (2, 1e-5)-DP.

  python -m experiments.run --config configs/fashion_mnist_dpzero.py
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
  config = default.get_config()
  config.dataset = "fashion_mnist"
  config.model = "cnn"
  config.model_kwargs = ml_collections.ConfigDict({"features": (8, 16)})
  config.estimator = "dpzero"
  config.estimator_kwargs = ml_collections.ConfigDict(
    {
      "smoothing": 1e-3,
      "directions": "gaussian",
    }
  )
  config.privacy.clip = 1.0
  config.privacy.num_queries = 1
  config.privacy.expected_batch_size = 256
  config.num_steps = 6000
  config.learning_rate = 0.02
  config.privacy.target_epsilon = 2.0
  config.privacy.delta = 1e-5
  config.eval_every = 1000
  return config
