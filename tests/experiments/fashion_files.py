"""Tiny Fashion-MNIST files in the upstream IDX format, written by the
tests under ``<root>/fashion-mnist/``: random images, labels ``i % 10``."""

import numpy as np

from zoprivacy.data.loaders import write_idx


def write_fashion(root, n_train: int, n_test: int) -> None:
  d = root / "fashion-mnist"
  d.mkdir()
  rng = np.random.default_rng(0)
  for prefix, n in (("train", n_train), ("t10k", n_test)):
    write_idx(
      d / f"{prefix}-images-idx3-ubyte.gz",
      rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
    )
    write_idx(
      d / f"{prefix}-labels-idx1-ubyte.gz",
      (np.arange(n) % 10).astype(np.uint8),
    )
