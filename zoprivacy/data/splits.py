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

Public data must not contain private examples, and no private record may
change the public set (the public set is used without accounting). Every
split function hashes the input rows and flags private rows that exactly
duplicate a public input: it raises :class:`DataOverlapError`
(``on_overlap="raise"``, the default), warns with :class:`DataOverlapWarning`
(``"warn"``), or warns and removes those rows *from the private set*
(``"drop"``, :func:`exclude_public`). The public set is a function of the
public candidates alone: never of the private records (a rule that dropped
public rows which a private record duplicates would let one private record
shrink the public set). Dropping a private row by a test of that row alone
against the fixed public set keeps neighbouring private sets neighbouring.
Only exact duplicates (byte-identical arrays of the same dtype and shape,
identical strings) are detected. Identical inputs hash alike, so within one
split they fall on one side unless their classes' rates differ.
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


def _overlap_message(rows, of: Dataset, other: Dataset) -> str:
  return (
    f"{len(rows)} of {len(of)} {of.name} examples are exact duplicates of "
    f"{other.name} examples; indices {rows[:10].tolist()}"
    f"{' ...' if len(rows) > 10 else ''}"
  )


def _check_mode(on_overlap: str) -> None:
  if on_overlap not in _ON_OVERLAP:
    raise ValueError(
      f"on_overlap must be one of {_ON_OVERLAP}, got {on_overlap!r}"
    )


def _comparable(public: Dataset, private: Dataset) -> bool:
  """Whether rows of the two sets can be identical at all."""
  return (
    public.inputs.shape[1:] == private.inputs.shape[1:]
    or public.inputs.dtype == object
  )


def check_no_overlap(
  public: Dataset, private: Dataset, on_overlap: str = "raise"
) -> Dataset:
  """Flags public examples whose input duplicates a private input; returns
  ``public``, unchanged.

  ``on_overlap``: ``"raise"`` -> :class:`DataOverlapError`; ``"warn"`` ->
  :class:`DataOverlapWarning`. ``"drop"`` is refused: dropping public rows
  that private records duplicate lets a private record change the public
  set; drop the private duplicates instead (:func:`exclude_public`).
  """
  _check_mode(on_overlap)
  if on_overlap == "drop":
    raise ValueError(
      "check_no_overlap never drops public rows: a private record that "
      "duplicated one would then change the public set, which is used "
      "without accounting. Keep the public set and drop the private "
      "duplicates: exclude_public(private, public, on_overlap='drop')."
    )
  exclude_public(private, public, on_overlap)
  return public


def kept_private_rows(
  private: Dataset, public: Dataset, on_overlap: str = "raise"
) -> np.ndarray:
  """Indices of the rows of ``private`` that :func:`exclude_public` keeps."""
  _check_mode(on_overlap)
  keep = np.arange(len(private), dtype=np.int64)
  if not _comparable(public, private):
    return keep  # differently shaped inputs cannot be identical
  dup = find_overlap(private.inputs, public.inputs)
  if len(dup) == 0:
    return keep
  msg = _overlap_message(dup, private, public)
  if on_overlap == "raise":
    raise DataOverlapError(
      msg + ". Pass on_overlap='drop' to remove them from the private set."
    )
  if on_overlap == "warn":
    warnings.warn(msg, DataOverlapWarning, stacklevel=3)
    return keep
  warnings.warn(
    msg + "; dropping them from the private set (the public set is kept)",
    DataOverlapWarning,
    stacklevel=3,
  )
  return np.setdiff1d(keep, dup)


def exclude_public(
  private: Dataset, public: Dataset, on_overlap: str = "raise"
) -> Dataset:
  """``private`` checked against the fixed ``public`` set.

  Private rows whose input duplicates a public input: ``"raise"`` ->
  :class:`DataOverlapError`; ``"warn"`` -> :class:`DataOverlapWarning`, kept;
  ``"drop"`` -> warning, removed from the private set. ``public`` is never
  read for anything but this test, and never changed: no private record can
  change it. Each private row is kept or dropped by a test of itself
  against ``public``, so adding or removing one private record changes the
  result by that record only.
  """
  keep = kept_private_rows(private, public, on_overlap)
  return private if len(keep) == len(private) else private.subset(keep)


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
  binomial, treated as public like the dataset size. Private rows that
  duplicate a public input (same input, another label, at a lower public
  rate) are handled per ``on_overlap`` (:func:`exclude_public`); with
  ``"drop"`` they are removed from the private set. The public part is the
  records whose own coins say public, whatever the private records are.
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
  keep = kept_private_rows(private, public, on_overlap)
  if len(keep) != len(private):
    private, private_idx = private.subset(keep), private_idx[keep]
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


def _ood_sample_indices(pool, num_samples, per_class, seed) -> np.ndarray:
  """Indices of the pool's public sample: a function of the pool and the
  public ``seed`` alone."""
  if num_samples is not None and per_class is not None:
    raise ValueError("give num_samples or per_class, not both")
  if per_class is not None:
    return few_shot_indices(pool, per_class, seed)
  if num_samples is not None:
    if num_samples > len(pool):
      raise ValueError(
        f"num_samples={num_samples} exceeds the pool size {len(pool)}"
      )
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(len(pool), num_samples, replace=False))
  return np.arange(len(pool), dtype=np.int64)


def ood_public_split(
  pool: Dataset,
  private: Dataset,
  num_samples: int | None = None,
  per_class: int | None = None,
  seed: int = 0,
  on_overlap: str = "raise",
) -> PublicPrivateSplit:
  """Out-of-distribution public data: a seeded sample of a *different*
  dataset ``pool`` with the same label space as ``private``, and
  ``private`` checked against it.

  Give either ``num_samples`` (uniform sample; PAZO IMDB: 2,000 Amazon
  Polarity reviews) or ``per_class`` (PAZO MNLI: 100 SNLI pairs per class);
  with neither the whole pool is used. The sample is a function of the pool
  and ``seed`` alone (the pool is public data: no neighbour-stable rule is
  needed). Private rows that duplicate a sampled input are handled per
  ``on_overlap`` (:func:`exclude_public`: ``"drop"`` removes them from the
  private set). ``public_indices`` index ``pool``, ``private_indices``
  ``private``.
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
  idx = _ood_sample_indices(pool, num_samples, per_class, seed)
  if per_class is not None:
    name = f"{pool.name}/{per_class}-shot"
  elif num_samples is not None:
    name = f"{pool.name}/public{num_samples}"
  else:
    name = pool.name
  public = pool if len(idx) == len(pool) else pool.subset(idx, name)
  keep = kept_private_rows(private, public, on_overlap)
  kept = private if len(keep) == len(private) else private.subset(keep)
  return PublicPrivateSplit(public, kept, idx, keep)


def sample_ood_public(pool: Dataset, private: Dataset, **options) -> Dataset:
  """The public sample of :func:`ood_public_split` (same keyword options:
  ``num_samples``, ``per_class``, ``seed``, ``on_overlap`` ``"raise"`` or
  ``"warn"``). ``"drop"`` is refused here, since it changes the *private*
  set: call :func:`ood_public_split` and train on its ``private``."""
  if options.get("on_overlap") == "drop":
    raise ValueError(
      "sample_ood_public(on_overlap='drop') would return the public sample "
      "without the private set it drops rows from; call ood_public_split "
      "(same arguments) and use both its public and its private parts."
    )
  return ood_public_split(pool, private, **options).public
