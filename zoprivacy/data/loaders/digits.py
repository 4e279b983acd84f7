"""scikit-learn digits: 1,797 real 8x8 grey-scale handwritten digits, 10 classes.

Bundled with scikit-learn, so always available offline. It serves as the small
real image task for quick end-to-end checks of the private zeroth-order methods
(DPZero / DP-ZO / PAZO / Noisy-ZOGD) on tiny convolutional or ViT models, in
place of CIFAR-10 (PAZO's NF-ResNet18 setting) when that data is not on disk.
"""

from __future__ import annotations

import gzip
import importlib.util
import os

import numpy as np

from zoprivacy.data.loaders import base


def _bundled_digits() -> tuple[np.ndarray, np.ndarray]:
  """``(images [N, 8, 8] float64, targets [N])`` of scikit-learn's digits.

  Read from the file scikit-learn ships (``datasets/data/digits.csv.gz``:
  64 pixel columns and the label), as ``sklearn.datasets.load_digits``
  reads it, without importing scikit-learn (about a second of a run's
  start); through scikit-learn where the file is not there.
  """
  spec = importlib.util.find_spec("sklearn")
  if spec is not None and spec.origin:
    path = os.path.join(
      os.path.dirname(spec.origin), "datasets", "data", "digits.csv.gz"
    )
    if os.path.exists(path):
      with gzip.open(path, "rt", encoding="utf-8") as f:
        data = np.loadtxt(f, delimiter=",")
      return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)
  from sklearn.datasets import load_digits as _sk_load_digits

  raw = _sk_load_digits()
  return raw.images, raw.target


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
  raw_images, targets = _bundled_digits()
  images = (raw_images.astype(np.float64) / 16.0).astype(dtype)[..., None]
  labels = base.as_labels(targets)
  train_idx, test_idx = base.held_out_split(raw_images, test_fraction, seed)
  names = tuple(str(i) for i in range(10))
  return base.DatasetSplits(
    train=base.Dataset(
      images[train_idx], labels[train_idx], 10, "digits/train", names
    ),
    test=base.Dataset(
      images[test_idx], labels[test_idx], 10, "digits/test", names
    ),
  )
