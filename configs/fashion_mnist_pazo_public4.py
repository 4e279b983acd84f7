"""Offline analog of PAZO Table 1: Fashion-MNIST with a 4% imbalanced public
split and the small CNN, DPZero for now, (2, 1e-5)-DP.

As in PAZO's CIFAR-10 setting, 4% of the 60,000 training images (2,400) are
public with imbalanced classes (exponential profile, 10x most/least ratio),
the other 57,600 private; the public part fills ``task.public_inputs`` for
the PAZO estimators and is not used by DPZero. Our choices, as in
``fashion_mnist_dpzero.py``: CNN (8, 16), batch 256, 6,000 steps, C = 1,
smoothing 1e-3, step size 0.02.

  python -m experiments.run --config configs/fashion_mnist_pazo_public4.py
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
  config = default.get_config()
  config.dataset = "fashion_mnist_public"
  config.model = "cnn"
  config.model_kwargs = ml_collections.ConfigDict({"features": (8, 16)})
  config.public = "imbalanced4"
  config.public_fraction = 0.04
  config.public_imbalance_ratio = 10.0
  config.eval_split = "test"
  config.validation_size = 5000

  config.estimator = "dpzero"
  config.estimator_kwargs = ml_collections.ConfigDict({
      "clip": 1.0, "smoothing": 1e-3, "directions": "gaussian", "num_queries": 1})
  config.expected_batch_size = 256
  config.num_steps = 6000
  config.learning_rate = 0.02
  config.target_epsilon = 2.0
  config.delta = 1e-5
  config.eval_every = 1000
  return config
