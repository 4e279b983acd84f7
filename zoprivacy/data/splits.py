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
  in expectation (:func:`split_public_private` at one rate for all classes).
* **IMDB** (LSTM): out-of-distribution public data, 2,000 Amazon Polarity
  reviews (4% of the IMDB training size) - :func:`sample_ood_public`.
* **MNLI** (RoBERTa-base prompt fine-tuning): few-shot, 512 training examples
  per class (:func:`few_shot_subsample`), 100 SNLI examples per class as OOD
  public data (:func:`sample_ood_public` with ``per_class=100``).

Splits of private data are neighbour-stable
(:mod:`zoprivacy.data.stable_split`): each record's side comes from a keyed
hash of the record alone. :func:`split_public_private` (its private part is
private, its public part public) moves no other record when one is added or
removed; :func:`few_shot_subsample` (its selection is the private training
set) keeps exactly ``k`` per class and may displace one other record.
:func:`sample_ood_public` samples a public pool: nothing in it is private.

Public data must not contain private examples (that would make "public"
gradients depend on private records). Every split function hashes the input
rows and flags public rows that exactly duplicate a private row: it raises
:class:`DataOverlapError` (``on_overlap="raise"``, the default), warns with
:class:`DataOverlapWarning` (``"warn"``), or warns and removes those public
rows (``"drop"``). Only exact duplicates (byte-identical arrays of the same
dtype and shape, identical strings) are detected. Identical inputs hash
alike, so within one split they fall on one side unless their classes'
rates differ.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from zoprivacy.data import stable_split
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
  rows = stable_split.record_bytes(np.asarray(inputs))
  out = np.empty((len(inputs),), dtype=object)
  out[:] = [hashlib.sha256(r).hexdigest() for r in rows]
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


def public_rates(
  num_classes: int,
  public_fraction: float,
  class_proportions: Sequence[float] | None = None,
) -> np.ndarray:
  """Each class's probability of being public: ``public_fraction`` for
  every class, or ``public_fraction * K * p_c`` for ``class_proportions``
  ``p`` (on a class-balanced dataset the public part then has the expected
  size ``public_fraction * N`` and class proportions ``p``). Public numbers
  only, so the rates are the same for every neighbouring dataset."""
  if not 0.0 < public_fraction < 1.0:
    raise ValueError(
      f"public_fraction must be in (0, 1), got {public_fraction}"
    )
  if class_proportions is None:
    return np.full(num_classes, float(public_fraction))
  p = np.asarray(class_proportions, dtype=np.float64)
  if len(p) != num_classes:
    raise ValueError(f"{len(p)} class proportions for {num_classes} classes")
  if np.any(p < 0) or p.sum() <= 0:
    raise ValueError("proportions must be non-negative with a positive sum")
  rates = public_fraction * num_classes * p / p.sum()
  if np.any(rates > 1.0):
    c = int(np.argmax(rates))
    raise ValueError(
      f"class {c} would be public with probability {rates[c]:.3g} > 1; "
      "lower public_fraction or the imbalance"
    )
  return rates


def split_public_private(
  dataset: Dataset,
  public_fraction: float = PAZO_PUBLIC_FRACTION,
  class_proportions: Sequence[float] | None = None,
  seed: int = 0,
  on_overlap: str = "raise",
) -> PublicPrivateSplit:
  """Splits ``dataset`` into a small public part and the private remainder.

  Neighbour-stable (:mod:`zoprivacy.data.stable_split`): a record of class
  ``c`` is public when its keyed hash falls below the public rate of
  :func:`public_rates` (``public_fraction``, or ``public_fraction * K *
  p_c`` for ``class_proportions``; pass :func:`imbalanced_class_proportions`
  for PAZO's imbalanced CIFAR-10 public set). Adding or removing one record
  changes the private part by that record at most and moves no other, so
  the private run's guarantee holds for the dataset's records that fall
  private. The public part is public (never protected); each part's size is
  binomial, treated as public like the dataset size. Public rows that
  duplicate a private input (same input, another label) are handled per
  ``on_overlap`` (see :func:`check_no_overlap`); with ``"drop"`` they are
  removed from the public set.
  """
  rates = public_rates(dataset.num_classes, public_fraction, class_proportions)
  u = stable_split.record_uniforms(
    dataset.inputs, seed=seed, purpose="public/private split"
  )
  is_public = stable_split.below(u, rates, dataset.labels)
  public_idx = np.flatnonzero(is_public).astype(np.int64)
  private_idx = np.flatnonzero(~is_public).astype(np.int64)
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


def few_shot_indices(dataset: Dataset, per_class: int, seed: int = 0):
  """Sorted indices of :func:`few_shot_subsample`'s selection."""
  u = stable_split.record_uniforms(
    dataset.inputs, seed=seed, purpose="few-shot"
  )
  return stable_split.lowest(u, int(per_class), dataset.labels)


def few_shot_subsample(
  dataset: Dataset, per_class: int, seed: int = 0
) -> Dataset:
  """``per_class`` examples of every class, in dataset order;
  MeZO/DPZero/PAZO few-shot protocol (e.g. 512 per class for MNLI).

  The examples of each class with the ``per_class`` smallest keyed hashes
  (:func:`zoprivacy.data.stable_split.lowest`, public ``seed``): exactly
  ``per_class`` each, and no rule can be exact and move no other record.
  Adding or removing one example of the pool changes the selection by at
  most one example in and one out, so a guarantee accounted on the
  selection (the private training set, as the papers define it) holds for
  the pool as a group guarantee over two examples. Used on a public pool
  (:func:`sample_ood_public`) the selection is public.
  """
  idx = few_shot_indices(dataset, per_class, seed)
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
  ``private`` for exact duplicates (see :func:`check_no_overlap`). The pool
  is public data, so its sample needs no neighbour-stable rule.
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
