"""SST-5 and TREC as MeZO's and DPZero's RoBERTa code reads them.

MeZO (``medium_models``) and DPZero (``roberta/``) read LM-BFF's data
(``datasets.tar`` from https://nlp.cs.princeton.edu/projects/lm-bff/,
extracted as ``original/``): ``sst-5/{train,test}.csv`` and
``trec/{train,test}.csv``, headerless CSV rows ``label,text`` (pandas'
``to_csv``: a field with a comma or a quote is quoted). TREC is also read
from its original release (https://cogcomp.seas.upenn.edu/Data/QA/QC/):
``train_5500.label`` and ``TREC_10.label``, one ``COARSE:fine question``
per line.

Labels: SST-5 0..4 (very negative .. very positive). TREC's coarse classes
in LM-BFF's order, :data:`TREC_CLASSES` (0 DESC, 1 ENTY, 2 ABBR, 3 HUM, 4 LOC,
5 NUM), the order of MeZO's label words Description, Entity, Expression,
Human, Location, Number. The Hugging Face ``trec`` exports number the classes
differently (``coarse_label``: ABBR, ENTY, DESC, HUM, LOC, NUM; the older
``label-coarse``: DESC, ENTY, ABBR, HUM, NUM, LOC); :func:`trec_label` maps
each to LM-BFF's order by the column's name.

The GLUE files of LM-BFF's ``original/`` (SST-2, MNLI, RTE) are read by
:mod:`zoprivacy.data.loaders.glue`.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from zoprivacy.data import stable_split
from zoprivacy.data.loaders import base

TREC_CLASSES = ("DESC", "ENTY", "ABBR", "HUM", "LOC", "NUM")
_TREC_COLUMNS = {
  "coarse_label": ("ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM"),
  "label-coarse": ("DESC", "ENTY", "ABBR", "HUM", "NUM", "LOC"),
  "label": TREC_CLASSES,
}
SST5_CLASSES = (
  "very negative",
  "negative",
  "neutral",
  "positive",
  "very positive",
)
LM_BFF_HOW = (
  "download LM-BFF's data (https://nlp.cs.princeton.edu/projects/lm-bff/"
  "datasets.tar, as MeZO's and DPZero's prepare scripts do), extract it and "
  "pass its original/ folder as data_dir"
)
TREC_RELEASE = ("train_5500.label", "TREC_10.label")
TREC_HOW = (
  LM_BFF_HOW + "; or put TREC's train_5500.label and TREC_10.label "
  "(https://cogcomp.seas.upenn.edu/Data/QA/QC/) in <data_dir>/trec"
)


def trec_label(row: dict) -> int | None:
  """The coarse class of a TREC row in LM-BFF's order: an integer in the
  order of its column (``coarse_label``, ``label-coarse`` or ``label``) or a
  class name (``"HUM"`` or ``"HUM:ind"``); ``None`` if unlabelled."""
  column = next((c for c in _TREC_COLUMNS if c in row), None)
  value = None if column is None else row[column]
  if value is None or value in (-1, "-1", ""):
    return None
  if isinstance(value, str) and not value.isdigit():
    name = value.split(":")[0]
    if name not in TREC_CLASSES:
      raise ValueError(f"TREC class {value!r}; expected one of {TREC_CLASSES}")
    return TREC_CLASSES.index(name)
  names = _TREC_COLUMNS[column]
  index = int(value)
  if not 0 <= index < len(names):
    raise ValueError(f"TREC {column}={value!r}: not in 0..{len(names) - 1}")
  return TREC_CLASSES.index(names[index])


def read_label_csv(path: Path, num_classes: int) -> tuple[list, list]:
  """``(texts, labels)`` of a headerless LM-BFF ``label,text`` CSV."""
  texts, labels = [], []
  with open(path, encoding="utf-8", newline="") as f:
    for lineno, row in enumerate(csv.reader(f), 1):
      if not row:
        continue
      if len(row) != 2 or not row[0].isdigit():
        raise ValueError(f"{path}:{lineno}: expected 'label,text', got {row}")
      if int(row[0]) >= num_classes:
        raise ValueError(f"{path}:{lineno}: label {row[0]} >= {num_classes}")
      labels.append(int(row[0]))
      texts.append(row[1])
  return texts, labels


def read_trec_release(path: Path) -> tuple[list, list]:
  """``(questions, labels)`` of TREC's ``train_5500.label`` /
  ``TREC_10.label`` (its one non-UTF-8 byte, 0xf0, read as a space, as the
  Hugging Face builder does)."""
  texts, labels = [], []
  with open(path, "rb") as f:
    for lineno, raw in enumerate(f, 1):
      line = raw.replace(b"\xf0", b" ").strip().decode("utf-8", "replace")
      if not line:
        continue
      label, _, text = line.partition(" ")
      try:
        labels.append(trec_label({"label": label}))
      except ValueError as e:
        raise ValueError(f"{path}:{lineno}: {e}") from e
      texts.append(text)
  return texts, labels


def _dataset(texts, labels, classes, name: str) -> base.Dataset:
  return base.Dataset(
    base.text_array([t.strip() for t in texts]),
    base.as_labels(labels),
    len(classes),
    name,
    tuple(classes),
  )


def load_sst5(data_dir: base.PathLike | None = None) -> base.DatasetSplits:
  """SST-5 from LM-BFF's ``sst-5/train.csv`` and ``sst-5/test.csv``."""
  root = base.find_dir_with(
    ("train.csv", "test.csv"),
    base.candidate_dirs("sst-5", data_dir),
    "SST-5",
    LM_BFF_HOW,
  )
  return base.DatasetSplits(
    *(
      _dataset(*read_label_csv(root / f"{s}.csv", 5), SST5_CLASSES, f"sst5/{s}")
      for s in ("train", "test")
    )
  )


def _trec_root(dirs) -> tuple[Path, tuple[str, str]]:
  """The folder and files of TREC: LM-BFF's CSVs, else the release's."""
  for files in (("train.csv", "test.csv"), TREC_RELEASE):
    try:
      return base.find_dir_with(files, dirs, "TREC", TREC_HOW), files
    except base.MissingDataError:
      continue
  # Neither complete: name LM-BFF's files (the primary format).
  base.find_dir_with(("train.csv", "test.csv"), dirs, "TREC", TREC_HOW)
  raise AssertionError("unreachable")


def load_trec(data_dir: base.PathLike | None = None) -> base.DatasetSplits:
  """TREC (coarse) from LM-BFF's ``trec/{train,test}.csv``, else from the
  original ``train_5500.label`` and ``TREC_10.label``."""
  root, files = _trec_root(base.candidate_dirs("trec", data_dir))
  if files == TREC_RELEASE:
    read = [read_trec_release(root / f) for f in files]
  else:
    read = [read_label_csv(root / f, len(TREC_CLASSES)) for f in files]
  return base.DatasetSplits(
    *(
      _dataset(*r, TREC_CLASSES, f"trec/{s}")
      for r, s in zip(read, ("train", "test"))
    )
  )


def at_most_k_per_class(dataset: base.Dataset, k: int, seed: int = 0):
  """Sorted indices of LM-BFF's k-shot training set: ``k`` examples of each
  class, all of a class that has fewer (its ``generate_k_shot_data.py``
  takes ``label_list[label][:k]``; TREC's ABBR class has 86 training
  questions, fewer than DPZero's ``k = 512``).

  Each class's ``k`` examples of smallest keyed hash, the hash of
  :func:`zoprivacy.data.splits.few_shot_indices` (the same selection when
  every class has ``k``): neighbouring pools give selections that differ by
  at most one example in and one out.
  """
  u = stable_split.record_uniforms(
    dataset.inputs, seed=seed, purpose="few-shot"
  )
  labels = np.asarray(dataset.labels)
  chosen = []
  for c in np.unique(labels):
    idx = np.flatnonzero(labels == c)
    chosen.append(idx[stable_split.lowest(u[idx], min(int(k), len(idx)))])
  return np.sort(np.concatenate(chosen)).astype(np.int64)
