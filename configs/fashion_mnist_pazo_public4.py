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

from configs import fashion_mnist_dpzero


def get_config() -> ml_collections.ConfigDict:
  config = fashion_mnist_dpzero.get_config()  # model, DPZero, budget, privacy
  config.dataset = "fashion_mnist_public"
  config.public = "imbalanced4"
  config.public_fraction = 0.04
  config.public_imbalance_ratio = 10.0
  config.eval_split = "test"
  config.validation_size = 5000
  return config
