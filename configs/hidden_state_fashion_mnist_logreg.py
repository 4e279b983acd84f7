"""Noisy-ZOGD on L2-regularized logistic regression on Fashion-MNIST.

The digits setting (``configs/hidden_state_digits_logreg.py``: m/M = 0.5,
R = 0.5, Delta = 2, eta = K/M, directional fraction 1/2) on the 60,000
Fashion-MNIST training images (d = 7,850). A full-batch step costs 2K
forward passes over all 60,000 images, so this config uses the mini-batch
form (Chien, Chen & Li, App. A.9): batches of 1,000 drawn without
replacement, independently at every step; the accountants use Thm A.3 and
Wang-Balle-Kasiviswanathan's subsampled composition.

  python -m experiments.run \
      --config configs/hidden_state_fashion_mnist_logreg.py
"""

import ml_collections

from configs import hidden_state_digits_logreg


def get_config() -> ml_collections.ConfigDict:
  config = hidden_state_digits_logreg.get_config()
  config.dataset = "fashion_mnist_logreg"
  config.estimator_kwargs.num_directions = 400  # K <= d/2 = 3925
  config.estimator_kwargs.noise_std = 1e-2
  config.privacy.sampling = "without_replacement"
  config.privacy.expected_batch_size = 1000  # b, fixed
  config.num_steps = 100
  return config
