"""Common containers, errors and path discovery for the dataset loaders.

Every loader returns numpy arrays held in memory, wrapped in :class:`Dataset`,
and a :class:`DatasetSplits` pair ``(train, test)``.  Image inputs are
``[N, H, W, C]`` arrays (float32 in ``[0, 1]`` by default); text inputs are
numpy ``object`` arrays of Python strings, shape ``[N]`` for single sentences
and ``[N, 2]`` for sentence pairs (premise, hypothesis).  Labels are ``int32``
class indices in ``[0, num_classes)``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, Union

import numpy as np

from zoprivacy.data import stable_split

PathLike = Union[str, "os.PathLike[str]"]

#: Environment variable that overrides the root of all local dataset copies.
DATA_DIR_ENV = "ZOPRIVACY_DATA_DIR"
#: Root used when neither an argument nor :data:`DATA_DIR_ENV` is given.
DEFAULT_DATA_ROOT = Path("~/.cache/zoprivacy")


@dataclasses.dataclass(frozen=True)
class Dataset:
  """A labelled dataset held in memory.

  Attributes:
    inputs: ``[N, ...]`` array. Images are ``[N, H, W, C]``; text is an
      ``object`` array of strings, ``[N]`` or ``[N, 2]`` for sentence pairs.
    labels: ``[N]`` int32 class indices.
    num_classes: number of classes (labels lie in ``[0, num_classes)``).
    name: short identifier, e.g. ``"cifar10/train"``.
    class_names: optional human-readable class names, index-aligned.
  """

  inputs: np.ndarray
  labels: np.ndarray
  num_classes: int
  name: str
  class_names: tuple[str, ...] | None = None

  def __post_init__(self):
    if len(self.inputs) != len(self.labels):
      raise ValueError(
        f"{self.name}: {len(self.inputs)} inputs but {len(self.labels)} labels"
      )
    if self.labels.ndim != 1:
      raise ValueError(
        f"{self.name}: labels must be 1-D, got {self.labels.shape}"
      )
    if len(self.labels) and (
      self.labels.min() < 0 or self.labels.max() >= self.num_classes
    ):
      raise ValueError(
        f"{self.name}: labels outside [0, {self.num_classes}): "
        f"min {self.labels.min()}, max {self.labels.max()}"
      )
    if (
      self.class_names is not None and len(self.class_names) != self.num_classes
    ):
      raise ValueError(
        f"{self.name}: {len(self.class_names)} class names for {self.num_classes} classes"
      )

  def __len__(self) -> int:
    return len(self.labels)

  def subset(self, indices: np.ndarray, name: str | None = None) -> Dataset:
    """Returns the examples at ``indices`` (a new Dataset, arrays copied)."""
    indices = np.asarray(indices)
    return dataclasses.replace(
      self,
      inputs=self.inputs[indices],
      labels=self.labels[indices],
      name=self.name if name is None else name,
    )

  def class_counts(self) -> np.ndarray:
    """``[num_classes]`` number of examples of each class."""
    return np.bincount(self.labels, minlength=self.num_classes)


class DatasetSplits(NamedTuple):
  """A train/test pair as returned by every ``load_*`` function."""

  train: Dataset
  test: Dataset


class MissingDataError(FileNotFoundError):
  """Raised when a dataset's files are not on disk.

  Attributes:
    dataset: the dataset's name.
    missing: the exact paths that were looked for and not found.
    instructions: how to obtain the files.
  """

  def __init__(
    self, dataset: str, missing: Sequence[PathLike], instructions: str
  ):
    self.dataset = dataset
    self.missing = [str(p) for p in missing]
    self.instructions = instructions
    listing = "\n".join(f"  - {p}" for p in self.missing)
    super().__init__(
      f"{dataset}: {len(self.missing)} required file(s) not found:\n{listing}\n"
      f"How to obtain them: {instructions}"
    )


def data_root(data_dir: PathLike | None = None) -> Path:
  """Root of local dataset copies: ``data_dir``, else ``$ZOPRIVACY_DATA_DIR``,
  else ``~/.cache/zoprivacy``."""
  if data_dir is not None:
    return Path(data_dir).expanduser()
  env = os.environ.get(DATA_DIR_ENV)
  if env:
    return Path(env).expanduser()
  return DEFAULT_DATA_ROOT.expanduser()


def candidate_dirs(
  subdir: str,
  data_dir: PathLike | None = None,
  extra: Sequence[PathLike] = (),
) -> list:
  """Directories in which a dataset whose canonical folder is ``subdir`` is
  looked for, in order.

  With an explicit ``data_dir`` only ``data_dir`` itself and
  ``data_dir/subdir`` are searched (so both the parent folder and the dataset
  folder may be passed).  Otherwise ``$ZOPRIVACY_DATA_DIR/subdir`` (when set),
  ``~/.cache/zoprivacy/subdir`` and the ``extra`` system locations.
  """
  if data_dir is not None:
    root = Path(data_dir).expanduser()
    return [root / subdir, root]
  dirs = []
  env = os.environ.get(DATA_DIR_ENV)
  if env:
    dirs.append(Path(env).expanduser() / subdir)
  dirs.append(DEFAULT_DATA_ROOT.expanduser() / subdir)
  dirs.extend(Path(p) for p in extra)
  return dirs


def find_dir_with(
  files: Sequence[str], dirs: Sequence[Path], dataset: str, instructions: str
) -> Path:
  """Returns the first directory in ``dirs`` that contains all ``files``.

  Raises :class:`MissingDataError` naming the files missing from the
  most complete candidate (ties: the first candidate) otherwise.
  """
  best_missing = None
  for d in dirs:
    missing = [d / f for f in files if not (d / f).exists()]
    if not missing:
      return d
    if best_missing is None or len(missing) < len(best_missing):
      best_missing = missing
  searched = ", ".join(str(d) for d in dirs)
  raise MissingDataError(
    dataset,
    best_missing,
    f"{instructions} (searched: {searched}; pass data_dir=... or set ${DATA_DIR_ENV})",
  )


def scale_images(images_uint8: np.ndarray, dtype) -> np.ndarray:
  """uint8 images -> ``dtype``; floating dtypes are scaled to ``[0, 1]`` by
  the constant 1/255, never by a statistic of the data (no mean or standard
  deviation of private images; ``docs/data.md``, the preprocessing rule)."""
  dtype = np.dtype(dtype)
  if dtype == np.uint8:
    return images_uint8
  if not np.issubdtype(dtype, np.floating):
    raise ValueError(f"dtype must be uint8 or a float dtype, got {dtype}")
  return images_uint8.astype(dtype) / dtype.type(255.0)


def as_labels(values) -> np.ndarray:
  return np.asarray(values, dtype=np.int32)


def text_array(texts: Sequence) -> np.ndarray:
  """A numpy ``object`` array of strings (``[N]`` or ``[N, 2]`` for pairs)."""
  if len(texts) and isinstance(texts[0], (tuple, list)):
    arr = np.empty((len(texts), len(texts[0])), dtype=object)
    for i, t in enumerate(texts):
      arr[i, :] = t
    return arr
  arr = np.empty((len(texts),), dtype=object)
  arr[:] = list(texts)
  return arr


def held_out_split(
  records, test_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
  """Sorted ``(train_idx, test_idx)`` for a dataset without an official
  test split, neighbour-stable: a record is a test record when its keyed
  hash falls below ``test_fraction`` (:func:`zoprivacy.data.stable_split.below`,
  public ``seed``), a coin of its own. Adding or removing one record moves
  no other record between the parts; each part's size (and its class
  counts) is binomial, about ``test_fraction`` of each class. ``records``:
  the raw records as the file holds them (hashed, so the split does not
  depend on how they are converted afterwards)."""
  if not 0.0 < test_fraction < 1.0:
    raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
  u = stable_split.record_uniforms(
    records, seed=seed, purpose="train/test split"
  )
  test = stable_split.below(u, test_fraction)
  return np.flatnonzero(~test), np.flatnonzero(test)
