"""PAZO Table 1: NF-ResNet18 trained from scratch on CIFAR-10, DPZero row, eps = 2.

Setting (PAZO Sec. 5 and App. C): CIFAR-10 (50,000 training images) with 4%
(2,000) held out as public data with imbalanced classes (the task's
``public="imbalanced4"``; the paper does not give the profile, the library
uses an exponential profile with a 10x most/least ratio), the other 48,000
private; delta = 1/#train. Hyper-parameters: smoothing 1e-2 (Table 7), C = 1
(Table 9), q = 5 queries per step (Table 8: DPZero needs q > 1), 200 epochs
(App. C.3: DPZero trains 200 epochs) at batch 64, i.e. 150,000 steps. The
step size 0.1 is a point of the Table 9 grid {0.01, ..., 1.0}; the paper does
not report which point it selected. The public split is filled for the PAZO
estimators (``task.public_inputs``); DPZero does not use it.

Needs ``cifar-10-batches-py`` under ``data_dir`` / ``$ZOPRIVACY_DATA_DIR`` and,
realistically, a GPU:

  python -m experiments.run --config configs/pazo_table1_cifar10_nfresnet18.py \
      --config.data_dir=/data
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
  config = default.get_config()
  config.dataset = "cifar10"
  config.model = "nf_resnet18"
  config.model_kwargs = ml_collections.ConfigDict()  # NFResNet() is NF-ResNet18
  config.public = "imbalanced4"
  config.public_fraction = 0.04
  config.public_imbalance_ratio = 10.0
  config.eval_split = "test"
  config.validation_size = 1000

  config.estimator = "dpzero"
  config.estimator_kwargs = ml_collections.ConfigDict(
    {
      "smoothing": 1e-2,
      "directions": "gaussian",
    }
  )
  config.privacy.clip = 1.0
  config.privacy.num_queries = 5
  config.optimizer = "sgd"
  config.learning_rate = 0.1
  config.privacy.expected_batch_size = 64
  config.num_steps = 150_000  # 200 epochs of 48,000 private images
  config.privacy.target_epsilon = 2.0
  config.privacy.delta = 1.0 / 48_000
  config.eval_every = 10_000
  config.checkpoint_every = 10_000
  return config
