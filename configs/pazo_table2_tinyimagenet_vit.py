"""PAZO Table 2: ViT-small on Tiny-ImageNet, DPZero row, eps = 2.

Setting (PAZO Sec. 5 and App. C.1): Tiny-ImageNet (100,000 training images,
200 classes) with 4% stratified public data (20 images per class), the rest
private; delta = 1/#train. The model is the library's 10.8M-parameter ViT
(``vit_small_pazo``: patch 8, width 384, depth 6, 6 heads), randomly
initialised (App. C.1; the Places365 pre-training mentioned in Sec. 5 is not
available here). Hyper-parameters: smoothing 1e-2 (Table 7), C = 1 (Table 9),
q = 5 (Table 8), 200 epochs at batch 64 (App. C.3) = 300,000 steps; step size
5e-4 from the Table 9 grid {1e-4, ..., 2e-3} (the selected point is not
reported).

Needs ``tiny-imagenet-200`` under ``data_dir`` and a GPU:

  python -m experiments.run --config configs/pazo_table2_tinyimagenet_vit.py \
      --config.data_dir=/data
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
  config = default.get_config()
  config.dataset = "tiny_imagenet"
  config.model = "vit_small"
  config.model_kwargs = ml_collections.ConfigDict()  # vit_small_pazo sizes
  config.max_per_class = 0  # 0: all 500 training images per class
  config.public = "stratified4"
  config.public_fraction = 0.04
  config.eval_split = "test"
  config.validation_size = 2000

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
  config.learning_rate = 5e-4
  config.privacy.expected_batch_size = 64
  config.num_steps = 300_000  # 200 epochs of 96,000 private images
  config.privacy.target_epsilon = 2.0
  config.privacy.delta = 1.0 / 96_000
  config.eval_every = 20_000
  config.checkpoint_every = 20_000
  return config
