"""Tiny-ImageNet-200 (Le & Yang, 2015): 200 classes of 64x64 RGB images,
100,000 train (500 per class) and 10,000 labelled validation images.

PAZO setting (2): ViT-small on Tiny-ImageNet with 4% of the training set
(20 images per class) as public data. The validation set serves as the test
set (the official test images are unlabelled).

Expected layout (``tiny-imagenet-200.zip`` extracted)::

    tiny-imagenet-200/
        wnids.txt                          # one WordNet id per line (200 lines)
        words.txt                          # optional: "wnid<TAB>names"
        train/<wnid>/images/<wnid>_<k>.JPEG
        val/images/val_<k>.JPEG
        val/val_annotations.txt            # "file<TAB>wnid<TAB>x0<TAB>y0<TAB>x1<TAB>y1"

Decoding needs Pillow (``pip install pillow``). Some images are grey-scale;
all are converted to RGB.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zoprivacy.data.loaders import base

SUBDIR = "tiny-imagenet-200"
IMAGE_SIZE = 64
INSTRUCTIONS = (
  "download http://cs231n.stanford.edu/tiny-imagenet-200.zip and unzip it, "
  "which creates tiny-imagenet-200/"
)


def _pil_image():
  try:
    from PIL import Image
  except ImportError as e:
    raise ImportError(
      "Tiny-ImageNet decoding needs Pillow: pip install 'pillow>=9'"
    ) from e
  return Image


def _read_image(path: Path, Image) -> np.ndarray:
  with Image.open(path) as im:
    arr = np.asarray(im.convert("RGB"), dtype=np.uint8)
  if arr.shape != (IMAGE_SIZE, IMAGE_SIZE, 3):
    raise ValueError(
      f"{path}: expected a {IMAGE_SIZE}x{IMAGE_SIZE} image, got {arr.shape}"
    )
  return arr


def tiny_imagenet_dir(data_dir: base.PathLike | None = None) -> Path:
  return base.find_dir_with(
    ("wnids.txt", "train", "val/images", "val/val_annotations.txt"),
    base.candidate_dirs(SUBDIR, data_dir),
    "Tiny-ImageNet",
    INSTRUCTIONS,
  )


def load_tiny_imagenet(
  data_dir: base.PathLike | None = None,
  dtype=np.float32,
  max_per_class: int | None = None,
) -> base.DatasetSplits:
  """Loads Tiny-ImageNet as ``[N, 64, 64, 3]`` images (float in ``[0, 1]`` or uint8).

  Full float32 train data takes 4.9 GB; pass ``dtype=np.uint8`` (1.2 GB) to
  convert later. ``max_per_class`` keeps only the first ``k`` training images
  of each class (sorted by file name), e.g. for quick runs.
  Labels follow the order of ``wnids.txt``.
  """
  Image = _pil_image()
  root = tiny_imagenet_dir(data_dir)
  wnids, names = _classes(root)
  index = {w: i for i, w in enumerate(wnids)}
  train_x, train_y = _train_images(root, wnids, index, max_per_class, Image)
  val_x, val_y = _val_images(root, index, Image)

  def dataset(xs, ys, split):
    images = (
      np.stack(xs) if xs else np.zeros((0, IMAGE_SIZE, IMAGE_SIZE, 3), np.uint8)
    )
    return base.Dataset(
      base.scale_images(images, dtype),
      base.as_labels(ys),
      len(wnids),
      f"tiny_imagenet/{split}",
      tuple(names),
    )

  return base.DatasetSplits(
    dataset(train_x, train_y, "train"), dataset(val_x, val_y, "val")
  )


def _classes(root):
  """``(wnids, names)``: the class ids of ``wnids.txt`` in order, and their
  names from ``words.txt`` where it exists (else the ids). The label map is
  the dataset's published class list, not counted from the images."""
  wnids = [
    w.strip()
    for w in (root / "wnids.txt").read_text().splitlines()
    if w.strip()
  ]
  names = list(wnids)
  words = root / "words.txt"
  if words.exists():
    lookup = dict(
      line.split("\t", 1)
      for line in words.read_text().splitlines()
      if "\t" in line
    )
    names = [lookup.get(w, w).strip() for w in wnids]
  return wnids, names


def _train_images(root, wnids, index, max_per_class, pil):
  """The training images of every class (sorted by file name, the first
  ``max_per_class`` of each if given) and their labels."""
  missing = [
    root / "train" / w / "images"
    for w in wnids
    if not (root / "train" / w / "images").is_dir()
  ]
  if missing:
    raise base.MissingDataError("Tiny-ImageNet", missing, INSTRUCTIONS)
  xs, ys = [], []
  for w in wnids:
    files = sorted(
      p
      for p in (root / "train" / w / "images").iterdir()
      if p.suffix.lower() in (".jpeg", ".jpg", ".png")
    )
    if max_per_class is not None:
      files = files[:max_per_class]
    xs.extend(_read_image(p, pil) for p in files)
    ys.extend([index[w]] * len(files))
  return xs, ys


def _val_images(root, index, pil):
  """The validation images listed in ``val_annotations.txt`` and their
  labels; a bad line or a missing image is an error."""
  xs, ys, missing = [], [], []
  for lineno, line in enumerate(
    (root / "val" / "val_annotations.txt").read_text().splitlines(), 1
  ):
    if not line.strip():
      continue
    parts = line.split("\t")
    if len(parts) < 2 or parts[1] not in index:
      raise ValueError(f"val_annotations.txt:{lineno}: bad line {line!r}")
    path = root / "val" / "images" / parts[0]
    if not path.exists():
      missing.append(path)
      continue
    xs.append(_read_image(path, pil))
    ys.append(index[parts[1]])
  if missing:
    raise base.MissingDataError("Tiny-ImageNet", missing, INSTRUCTIONS)
  return xs, ys
