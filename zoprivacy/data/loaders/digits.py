"""scikit-learn digits: 1,797 real 8x8 grey-scale handwritten digits, 10 classes.

Bundled with scikit-learn, so always available offline. It serves as the small
real image task for quick end-to-end checks of the private zeroth-order methods
(DPZero / DP-ZO / PAZO / Noisy-ZOGD) on tiny convolutional or ViT models, in
place of CIFAR-10 (PAZO's NF-ResNet18 setting) when that data is not on disk.
"""

from __future__ import annotations

import numpy as np

from zoprivacy.data.loaders import base


def load_digits(
  test_fraction: float = 0.2, seed: int = 0, dtype=np.float32
) -> base.DatasetSplits:
  """Loads ``sklearn.datasets.load_digits`` as ``[N, 8, 8, 1]`` images in ``[0, 1]``.

  The raw pixel values are integers 0..16 and are divided by 16 (a
  constant, not a statistic of the data). There is no official test split:
  each image is a test image by a keyed coin of its own at rate
  ``test_fraction`` (:func:`~zoprivacy.data.loaders.base.held_out_split` on
  the raw images, public ``seed``), so adding or removing one image moves
  no other; at ``seed=0`` the test part holds 366 of the 1,797 images.
  """
  from sklearn.datasets import load_digits as _sk_load_digits

  raw = _sk_load_digits()
  images = (raw.images.astype(np.float64) / 16.0).astype(dtype)[..., None]
  labels = base.as_labels(raw.target)
  train_idx, test_idx = base.held_out_split(raw.images, test_fraction, seed)
  names = tuple(str(i) for i in range(10))
  return base.DatasetSplits(
    train=base.Dataset(
      images[train_idx], labels[train_idx], 10, "digits/train", names
    ),
    test=base.Dataset(
      images[test_idx], labels[test_idx], 10, "digits/test", names
    ),
  )
