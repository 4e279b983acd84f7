"""Fashion-MNIST (Xiao et al., 2017): 60,000 / 10,000 28x28 grey-scale images, 10 classes.

Available offline from the Debian package ``dataset-fashion-mnist``, which
installs ``/usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``.
A real, medium-sized image task for the image-classification experiments
(PAZO's CIFAR-10 / NF-ResNet18 pipeline, run here without CIFAR-10 on disk).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zoprivacy.data.loaders import base
from zoprivacy.data.loaders.idx import IDXFormatError, read_idx

#: Where the Debian package ``dataset-fashion-mnist`` installs the files.
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
CLASS_NAMES = (
  "T-shirt/top",
  "Trouser",
  "Pullover",
  "Dress",
  "Coat",
  "Sandal",
  "Shirt",
  "Sneaker",
  "Bag",
  "Ankle boot",
)
FILES = {
  "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
  "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
INSTRUCTIONS = (
  "`sudo apt-get install dataset-fashion-mnist` (Debian/Ubuntu; installs to "
  f"{DEBIAN_DIR}), or download the four *-ubyte.gz files from "
  "https://github.com/zalandoresearch/fashion-mnist (data/fashion) into one folder"
)


def _find(directory: Path, stem: str) -> Path | None:
  for name in (stem + ".gz", stem):
    if (directory / name).is_file():
      return directory / name
  return None


def fashion_mnist_dir(data_dir: base.PathLike | None = None) -> Path:
  """The first directory holding all four IDX files (``.gz`` or not)."""
  dirs = base.candidate_dirs("fashion-mnist", data_dir, extra=[DEBIAN_DIR])
  stems = [s for pair in FILES.values() for s in pair]
  best = None
  for d in dirs:
    missing = [d / (s + ".gz") for s in stems if _find(d, s) is None]
    if not missing:
      return d
    if best is None or len(missing) < len(best):
      best = missing
  raise base.MissingDataError(
    "Fashion-MNIST",
    best,
    INSTRUCTIONS
    + f" (searched: {', '.join(map(str, dirs))}; uncompressed files are "
    "accepted too; pass data_dir=... or set $ZOPRIVACY_DATA_DIR)",
  )


def _load_split(directory: Path, split: str, dtype) -> base.Dataset:
  img_stem, lbl_stem = FILES[split]
  images = read_idx(_find(directory, img_stem), expected_ndim=3)
  labels = read_idx(_find(directory, lbl_stem), expected_ndim=1)
  if images.dtype != np.uint8 or labels.dtype != np.uint8:
    raise IDXFormatError(
      f"Fashion-MNIST {split}: expected unsigned-byte IDX files"
    )
  if len(images) != len(labels):
    raise IDXFormatError(
      f"Fashion-MNIST {split}: {len(images)} images but {len(labels)} labels"
    )
  return base.Dataset(
    base.scale_images(images, dtype)[..., None],
    base.as_labels(labels),
    10,
    f"fashion_mnist/{split}",
    CLASS_NAMES,
  )


def load_fashion_mnist(
  data_dir: base.PathLike | None = None, dtype=np.float32
) -> base.DatasetSplits:
  """Loads Fashion-MNIST as ``[N, 28, 28, 1]`` images (float in ``[0, 1]`` or uint8).

  Files are looked for in ``data_dir`` (or ``data_dir/fashion-mnist``), else in
  ``$ZOPRIVACY_DATA_DIR/fashion-mnist``, ``~/.cache/zoprivacy/fashion-mnist``
  and ``/usr/share/datasets/fashion-mnist``.
  """
  directory = fashion_mnist_dir(data_dir)
  return base.DatasetSplits(
    _load_split(directory, "train", dtype),
    _load_split(directory, "test", dtype),
  )
