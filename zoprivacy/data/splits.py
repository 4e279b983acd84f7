"""Public/private splits with the distribution shifts of PAZO (Gong & Li), App. C.1.

PAZO uses a small public dataset, shifted from the private one, to guide the
private zeroth-order gradient estimate:

* **CIFAR-10** (NF-ResNet18): 4% of the training set is public, *with class
  imbalance* among the 10 classes (a mild distribution shift); the rest is
  private. The paper does not publish the imbalance profile, so here it is an
  explicit, seeded parameter: :func:`imbalanced_class_proportions` gives an
  exponential profile whose most/least frequent class ratio is
  ``imbalance_ratio``, with a seeded assignment of classes to ranks.
  :func:`pazo_cifar10_split` applies it.
* **Tiny-ImageNet** (ViT-small): 4% random public sample, 20 images per class
  (:func:`split_public_private` with the dataset's own class distribution).
* **IMDB** (LSTM): out-of-distribution public data, 2,000 Amazon Polarity
  reviews (4% of the IMDB training size) - :func:`sample_ood_public`.
* **MNLI** (RoBERTa-base prompt fine-tuning): few-shot, 512 training examples
  per class (:func:`few_shot_subsample`), 100 SNLI examples per class as OOD
  public data (:func:`sample_ood_public` with ``per_class=100``).

Public data must not contain private examples (that would make "public"
gradients depend on private records). Every split function hashes the input
rows and flags public rows that exactly duplicate a private row: it raises
:class:`DataOverlapError` (``on_overlap="raise"``, the default), warns with
:class:`DataOverlapWarning` (``"warn"``), or warns and removes those public
rows (``"drop"``). Only exact duplicates (byte-identical arrays of the same
dtype and shape, identical strings) are detected.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from zoprivacy.data.loaders.base import Dataset

#: PAZO's public fraction for CIFAR-10 and Tiny-ImageNet (App. C.1).
PAZO_PUBLIC_FRACTION = 0.04
_ON_OVERLAP = ("raise", "warn", "drop")


class DataOverlapError(ValueError):
  """Public data contains exact duplicates of private inputs."""


class DataOverlapWarning(UserWarning):
  """Public data contains exact duplicates of private inputs (warned, or dropped)."""


class PublicPrivateSplit(NamedTuple):
  """Result of an in-distribution split. ``public_indices`` and
  ``private_indices`` index the dataset that was split."""

  public: Dataset
  private: Dataset
  public_indices: np.ndarray
  private_indices: np.ndarray


def row_hashes(inputs: np.ndarray) -> np.ndarray:
  """SHA-256 hex digest of each row of ``inputs`` (``object`` array of str ``[N, ...]``
  or a numeric array). Numeric rows hash their dtype, shape and bytes;
  text rows hash the row's strings (fields separated by ``\\x1f``)."""
  inputs = np.asarray(inputs)
  out = np.empty((len(inputs),), dtype=object)
  if inputs.dtype == object or inputs.dtype.kind in "US":
    for i, row in enumerate(inputs):
      fields = [row] if np.ndim(row) == 0 else list(np.ravel(row))
      out[i] = hashlib.sha256(
        "\x1f".join(map(str, fields)).encode("utf-8")
      ).hexdigest()
    return out
  prefix = f"{inputs.dtype.str}{inputs.shape[1:]}".encode()
  for i, row in enumerate(inputs):
    out[i] = hashlib.sha256(
      prefix + np.ascontiguousarray(row).tobytes()
    ).hexdigest()
  return out


def find_overlap(
  public_inputs: np.ndarray, private_inputs: np.ndarray
) -> np.ndarray:
  """Sorted indices of public rows that exactly duplicate some private row."""
  private = set(row_hashes(private_inputs))
  return np.asarray(
    [i for i, h in enumerate(row_hashes(public_inputs)) if h in private],
    dtype=np.int64,
  )


def check_no_overlap(
  public: Dataset, private: Dataset, on_overlap: str = "raise"
) -> Dataset:
  """Flags public examples whose input duplicates a private input.

  ``on_overlap``: ``"raise"`` -> :class:`DataOverlapError`; ``"warn"`` ->
  :class:`DataOverlapWarning` and ``public`` unchanged; ``"drop"`` ->
  warning and ``public`` without the overlapping rows. Returns the public set.
  """
  if on_overlap not in _ON_OVERLAP:
    raise ValueError(
      f"on_overlap must be one of {_ON_OVERLAP}, got {on_overlap!r}"
    )
  if (
    public.inputs.shape[1:] != private.inputs.shape[1:]
    and public.inputs.dtype != object
  ):
    return public  # differently shaped inputs cannot be identical
  overlap = find_overlap(public.inputs, private.inputs)
  if len(overlap) == 0:
    return public
  msg = (
    f"{len(overlap)} of {len(public)} public examples ({public.name}) are exact "
    f"duplicates of private examples ({private.name}); public indices "
    f"{overlap[:10].tolist()}{' ...' if len(overlap) > 10 else ''}"
  )
  if on_overlap == "raise":
    raise DataOverlapError(msg + ". Pass on_overlap='drop' to remove them.")
  if on_overlap == "warn":
    warnings.warn(msg, DataOverlapWarning, stacklevel=2)
    return public
  warnings.warn(
    msg + "; dropping them from the public set",
    DataOverlapWarning,
    stacklevel=2,
  )
  keep = np.setdiff1d(np.arange(len(public)), overlap)
  return public.subset(keep)


def imbalanced_class_proportions(
  num_classes: int, imbalance_ratio: float, seed: int | None = None
) -> np.ndarray:
  """Exponential class profile ``p_c ∝ imbalance_ratio ** (-rank_c / (K - 1))``.

  The most frequent class is ``imbalance_ratio`` times as frequent as the
  least frequent one (``1.0`` gives the uniform profile). With ``seed=None``
  class 0 is the most frequent and class K-1 the least; otherwise the ranks
  are a seeded random permutation. Returns ``[K]`` proportions summing to 1.
  """
  if num_classes < 1:
    raise ValueError("num_classes must be >= 1")
  if imbalance_ratio < 1.0:
    raise ValueError(f"imbalance_ratio must be >= 1, got {imbalance_ratio}")
  ranks = np.arange(num_classes, dtype=np.float64)
  if seed is not None:
    ranks = np.random.default_rng(seed).permutation(ranks)
  denom = max(num_classes - 1, 1)
  weights = imbalance_ratio ** (-ranks / denom)
  return weights / weights.sum()


def counts_from_proportions(
  total: int, proportions: Sequence[float]
) -> np.ndarray:
  """Integer counts summing exactly to ``total`` (largest-remainder rounding)."""
  p = np.asarray(proportions, dtype=np.float64)
  if np.any(p < 0) or p.sum() <= 0:
    raise ValueError("proportions must be non-negative with a positive sum")
  raw = total * p / p.sum()
  counts = np.floor(raw).astype(np.int64)
  short = total - counts.sum()
  order = np.argsort(-(raw - counts), kind="stable")
  counts[order[:short]] += 1
  return counts


def split_public_private(
  dataset: Dataset,
  public_fraction: float = PAZO_PUBLIC_FRACTION,
  class_proportions: Sequence[float] | None = None,
  seed: int = 0,
  on_overlap: str = "raise",
) -> PublicPrivateSplit:
  """Splits ``dataset`` into a small public part and the private remainder.

  The public part has ``round(public_fraction * N)`` examples distributed
  over classes by ``class_proportions`` (default: the dataset's own class
  frequencies, i.e. a stratified split; pass
  :func:`imbalanced_class_proportions` for PAZO's imbalanced CIFAR-10 public
  set). Examples are drawn at random (seeded) within each class; all others
  are private. Public rows that duplicate a private input are handled per
  ``on_overlap`` (see :func:`check_no_overlap`); with ``"drop"`` they are
  removed from the public set (they stay private).
  """
  n = len(dataset)
  if not 0.0 < public_fraction < 1.0:
    raise ValueError(
      f"public_fraction must be in (0, 1), got {public_fraction}"
    )
  n_public = int(round(public_fraction * n))
  available = dataset.class_counts()
  if class_proportions is None:
    class_proportions = available / available.sum()
  if len(class_proportions) != dataset.num_classes:
    raise ValueError(
      f"{len(class_proportions)} class proportions for "
      f"{dataset.num_classes} classes"
    )
  counts = counts_from_proportions(n_public, class_proportions)
  if np.any(counts > available):
    c = int(np.argmax(counts - available))
    raise ValueError(
      f"class {c} needs {counts[c]} public examples, only {available[c]} exist"
    )
  rng = np.random.default_rng(seed)
  public_idx = []
  for c in range(dataset.num_classes):
    idx = np.flatnonzero(dataset.labels == c)
    public_idx.append(rng.choice(idx, size=int(counts[c]), replace=False))
  public_idx = np.sort(np.concatenate(public_idx)).astype(np.int64)
  private_idx = np.setdiff1d(np.arange(n), public_idx)
  public = dataset.subset(public_idx, f"{dataset.name}/public")
  private = dataset.subset(private_idx, f"{dataset.name}/private")
  checked = check_no_overlap(public, private, on_overlap)
  if len(checked) != len(public):
    dup = find_overlap(public.inputs, private.inputs)
    public_idx = np.delete(public_idx, dup)
    public = checked
  return PublicPrivateSplit(public, private, public_idx, private_idx)


def pazo_cifar10_split(
  train: Dataset,
  imbalance_ratio: float = 10.0,
  seed: int = 0,
  public_fraction: float = PAZO_PUBLIC_FRACTION,
  on_overlap: str = "raise",
) -> PublicPrivateSplit:
  """PAZO's CIFAR-10 split: 4% public with class imbalance, the rest private.

  PAZO states only that the public classes are imbalanced; the default
  exponential profile with a 10x most/least ratio is this library's choice,
  with the class-to-rank assignment drawn from ``seed`` (so it is explicit and
  reproducible). With 50,000 training images the public set has 2,000.
  """
  props = imbalanced_class_proportions(train.num_classes, imbalance_ratio, seed)
  return split_public_private(train, public_fraction, props, seed, on_overlap)


def few_shot_subsample(
  dataset: Dataset, per_class: int, seed: int = 0
) -> Dataset:
  """``per_class`` random examples of every class (seeded), in dataset order;
  MeZO/DPZero/PAZO few-shot protocol (e.g. 512 per class for MNLI)."""
  counts = dataset.class_counts()
  if np.any(counts < per_class):
    c = int(np.argmin(counts))
    raise ValueError(
      f"class {c} has {counts[c]} examples, fewer than {per_class}"
    )
  rng = np.random.default_rng(seed)
  idx = np.sort(
    np.concatenate(
      [
        rng.choice(
          np.flatnonzero(dataset.labels == c),
          size=per_class,
          replace=False,
        )
        for c in range(dataset.num_classes)
      ]
    )
  )
  return dataset.subset(idx, f"{dataset.name}/{per_class}-shot")


def sample_ood_public(
  pool: Dataset,
  private: Dataset,
  num_samples: int | None = None,
  per_class: int | None = None,
  seed: int = 0,
  on_overlap: str = "raise",
) -> Dataset:
  """Out-of-distribution public data: a seeded sample of a *different*
  dataset ``pool`` with the same label space as ``private``.

  Give either ``num_samples`` (uniform sample; PAZO IMDB: 2,000 Amazon
  Polarity reviews) or ``per_class`` (PAZO MNLI: 100 SNLI pairs per class);
  with neither the whole pool is used. The result is checked against
  ``private`` for exact duplicates (see :func:`check_no_overlap`).
  """
  if pool.num_classes != private.num_classes:
    raise ValueError(
      f"public pool {pool.name} has {pool.num_classes} classes, private "
      f"{private.name} has {private.num_classes}"
    )
  if pool.inputs.shape[1:] != private.inputs.shape[1:]:
    raise ValueError(
      f"input shapes differ: public {pool.inputs.shape[1:]}, "
      f"private {private.inputs.shape[1:]}"
    )
  if num_samples is not None and per_class is not None:
    raise ValueError("give num_samples or per_class, not both")
  if per_class is not None:
    public = few_shot_subsample(pool, per_class, seed)
  elif num_samples is not None:
    if num_samples > len(pool):
      raise ValueError(
        f"num_samples={num_samples} exceeds the pool size {len(pool)}"
      )
    idx = np.sort(
      np.random.default_rng(seed).choice(len(pool), num_samples, replace=False)
    )
    public = pool.subset(idx, f"{pool.name}/public{num_samples}")
  else:
    public = pool
  return check_no_overlap(public, private, on_overlap)
