"""Noisy-ZOGD on L2-regularized logistic regression on digits (strongly convex).

Chien, Chen & Li, eq. (3): K orthonormal directions, full batch, clip
Delta on the finite difference, directional and isotropic noise, projection
onto the ball of radius R; step size eta = K/M (Cor. 3.3's choice). The
loss (``experiments/tasks/logreg.py``) is M-smooth and m-strongly
convex with M = 1/2 + l2 and m = l2 (here m/M = 0.5), and Lipschitz with
constant sqrt(2) + l2 (R + xi) <= Delta on the ball. Nothing is evaluated or
checkpointed before the last step, so the report gives the final-iterate
(hidden-state) epsilon next to the composition and output-perturbation ones.

  python -m experiments.run --config configs/hidden_state_digits_logreg.py
"""

import ml_collections
from ml_collections import config_dict

from configs import default


def get_config() -> ml_collections.ConfigDict:
  config = default.get_config()
  config.dataset = "digits_logreg"
  config.model = "linear"
  config.l2 = 0.5  # m / M = 0.5 / (0.5 + 0.5)
  config.radius = 0.5  # R; the regularized optimum has norm 0.16
  config.estimator = "noisy_zogd"
  config.estimator_kwargs = ml_collections.ConfigDict(
    {
      "num_directions": 200,  # K <= d/2 = 325
      # sigma of eq. (3), the paper's unit: read as privacy.noise_multiplier
      # (experiments/run/hidden_state_run.py); or set that, or a target.
      "noise_std": 3e-4,
      "smoothing": 1e-4,  # xi
      "directional_fraction": 0.5,  # beta: directional share of sigma^2
    }
  )
  config.privacy.clip = 2.0  # Delta >= sqrt(2) + l2 (R + xi)
  # What the estimator draws (float32 Gaussians, secure mode, snapped to a
  # lattice with exact noise) and what its analysis assumes.
  config.privacy.noise = "secure_mode"
  config.privacy.neighboring = "replace_one"
  config.learning_rate = config_dict.placeholder(float)  # None: eta = K/M
  config.privacy.sampling = "full_batch"
  config.num_steps = 200
  config.privacy.target_epsilon = None
  config.privacy.noise_multiplier = None
  config.privacy.delta = 1e-5
  config.eval_every = 0  # any intermediate evaluation is published
  config.checkpoint_every = 0
  config.hidden_state = ml_collections.ConfigDict(
    {
      "report": True,
      # Checkpoints written to workdir for resuming stay with the trainer;
      # set False if they are shared (then the final-iterate epsilon is
      # refused).
      "checkpoints_private": True,
    }
  )
  return config
