"""CIFAR-10 (Krizhevsky, 2009) from the official "python version" pickle batches.

PAZO setting (1): NF-ResNet18 trained from scratch on CIFAR-10, 4% of the
training set used as (class-imbalanced) public data; see
:func:`zoprivacy.data.splits.split_public_private`.

Expected layout (``cifar-10-python.tar.gz`` extracted)::

    cifar-10-batches-py/
        batches.meta        # dict: b'label_names', b'num_cases_per_batch', b'num_vis'
        data_batch_1 ... data_batch_5
        test_batch          # dict: b'data' uint8 [10000, 3072] (R, G, B planes, 32x32 row-major),
                            #       b'labels' list[int], b'batch_label', b'filenames'

The pickles are read with a restricted unpickler that only reconstructs
built-in containers and numpy arrays, so a tampered file cannot execute code.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from zoprivacy.data.loaders import base

SUBDIR = "cifar-10-batches-py"
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
META_FILE = "batches.meta"
INSTRUCTIONS = (
  "download https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz and extract it "
  "(`tar xzf cifar-10-python.tar.gz`), which creates cifar-10-batches-py/"
)

_ALLOWED_GLOBALS = {
  ("numpy.core.multiarray", "_reconstruct"),
  ("numpy._core.multiarray", "_reconstruct"),
  ("numpy.core.multiarray", "scalar"),
  ("numpy._core.multiarray", "scalar"),
  ("numpy", "ndarray"),
  ("numpy", "dtype"),
  ("_codecs", "encode"),
}


class _RestrictedUnpickler(pickle.Unpickler):
  def find_class(self, module, name):
    if (module, name) in _ALLOWED_GLOBALS:
      return super().find_class(module, name)
    raise pickle.UnpicklingError(
      f"CIFAR-10 batch refers to {module}.{name}; refusing to load"
    )


def read_batch(path: base.PathLike) -> dict:
  """Unpickles one CIFAR batch file (keys are bytes, as in the original files)."""
  with open(path, "rb") as f:
    return _RestrictedUnpickler(f, encoding="bytes").load()


def _get(d: dict, key: str):
  return d[key.encode()] if key.encode() in d else d[key]


def _decode_batch(batch: dict, source: str):
  data = np.asarray(_get(batch, "data"), dtype=np.uint8)
  labels = base.as_labels(_get(batch, "labels"))
  if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
    raise ValueError(
      f"{source}: data must be [N, 3072] uint8, got {data.shape}"
    )
  if len(labels) != len(data):
    raise ValueError(f"{source}: {len(data)} images but {len(labels)} labels")
  images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
  return images, labels


def cifar10_dir(data_dir: base.PathLike | None = None) -> Path:
  return base.find_dir_with(
    TRAIN_FILES + (TEST_FILE, META_FILE),
    base.candidate_dirs(SUBDIR, data_dir),
    "CIFAR-10",
    INSTRUCTIONS,
  )


def load_cifar10(
  data_dir: base.PathLike | None = None, dtype=np.float32
) -> base.DatasetSplits:
  """Loads CIFAR-10 as ``[N, 32, 32, 3]`` images (float in ``[0, 1]``, or uint8).

  ``data_dir`` may be the folder containing ``cifar-10-batches-py`` or that
  folder itself; default ``$ZOPRIVACY_DATA_DIR`` or ``~/.cache/zoprivacy``.
  Raises :class:`~zoprivacy.data.loaders.base.MissingDataError` naming the
  missing batch files.
  """
  directory = cifar10_dir(data_dir)
  meta = read_batch(directory / META_FILE)
  names = tuple(
    n.decode() if isinstance(n, bytes) else str(n)
    for n in _get(meta, "label_names")
  )
  train_parts = [
    _decode_batch(read_batch(directory / f), str(directory / f))
    for f in TRAIN_FILES
  ]
  train_x = np.concatenate([p[0] for p in train_parts])
  train_y = np.concatenate([p[1] for p in train_parts])
  test_x, test_y = _decode_batch(
    read_batch(directory / TEST_FILE), str(directory / TEST_FILE)
  )
  k = len(names)
  return base.DatasetSplits(
    base.Dataset(
      base.scale_images(train_x, dtype), train_y, k, "cifar10/train", names
    ),
    base.Dataset(
      base.scale_images(test_x, dtype), test_y, k, "cifar10/test", names
    ),
  )
