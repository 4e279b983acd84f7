"""Amazon Review Polarity (Zhang et al., 2015): 3.6M / 400K reviews, binary.

PAZO setting (3): out-of-distribution public data for the IMDB LSTM (2,000
examples, 4% of the IMDB training size). Since the full training CSV is 1.5 GB,
:func:`load_amazon_polarity` can draw a uniform random sample while streaming
(reservoir sampling) instead of holding all 3.6M reviews in memory.

Expected layout (``amazon_review_polarity_csv.tgz`` extracted)::

    amazon_review_polarity_csv/
        train.csv   # "label","title","content" per line, label 1 = negative, 2 = positive,
        test.csv    # fields quoted with '"', inner quotes doubled, newlines written as \\n

Labels: 0 = negative, 1 = positive. Input text = ``title + " " + content``
(``join_title=False`` keeps only the content).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from zoprivacy.data.loaders import base

SUBDIR = "amazon_review_polarity_csv"
CLASS_NAMES = ("negative", "positive")
INSTRUCTIONS = (
  "download amazon_review_polarity_csv.tgz (Zhang et al. 2015, Xiang Zhang's Google Drive "
  "folder linked from https://github.com/zhangxiangxiao/Crepe) and extract it, or export "
  "the Hugging Face dataset 'amazon_polarity' to this CSV format"
)


def amazon_polarity_dir(data_dir: base.PathLike | None = None) -> Path:
  return base.find_dir_with(
    ("train.csv", "test.csv"),
    base.candidate_dirs(SUBDIR, data_dir),
    "Amazon Polarity",
    INSTRUCTIONS,
  )


def _rows(path: Path):
  with open(path, newline="", encoding="utf-8") as f:
    for lineno, row in enumerate(csv.reader(f), 1):
      if not row:
        continue
      if len(row) != 3 or row[0] not in ("1", "2"):
        raise ValueError(
          f"{path}:{lineno}: expected \"label\",\"title\",\"content\" "
          f"with label 1 or 2, got {row[:3]!r}"
        )
      yield row


def _clean(s: str) -> str:
  return s.replace("\\n", " ").strip()


def read_amazon_csv(
  path: base.PathLike,
  sample_size: int | None = None,
  seed: int = 0,
  join_title: bool = True,
  name: str = "amazon_polarity",
  head: int | None = None,
) -> base.Dataset:
  """Reads one Amazon Polarity CSV; with ``sample_size`` keeps a uniform random
  subset of that many rows (seeded reservoir sampling, single pass), in file
  order. ``head=n`` reads only the file's first ``n`` rows (and samples
  among them)."""
  rng = np.random.default_rng(seed)
  kept = []  # (row_number, label, text)
  for i, (label, title, content) in enumerate(_rows(Path(path))):
    if head is not None and i >= head:
      break
    text = (
      (_clean(title) + " " + _clean(content)).strip()
      if join_title
      else _clean(content)
    )
    item = (i, int(label) - 1, text)
    if sample_size is None or len(kept) < sample_size:
      kept.append(item)
    else:
      j = int(rng.integers(0, i + 1))
      if j < sample_size:
        kept[j] = item
  kept.sort()
  return base.Dataset(
    base.text_array([t for _, _, t in kept]),
    base.as_labels([l for _, l, _ in kept]),
    2,
    name,
    CLASS_NAMES,
  )


def load_amazon_polarity(
  data_dir: base.PathLike | None = None,
  train_sample_size: int | None = None,
  test_sample_size: int | None = None,
  seed: int = 0,
  join_title: bool = True,
) -> base.DatasetSplits:
  """Loads Amazon Polarity train/test, optionally as seeded uniform samples."""
  root = amazon_polarity_dir(data_dir)
  return base.DatasetSplits(
    read_amazon_csv(
      root / "train.csv",
      train_sample_size,
      seed,
      join_title,
      "amazon_polarity/train",
    ),
    read_amazon_csv(
      root / "test.csv",
      test_sample_size,
      seed + 1,
      join_title,
      "amazon_polarity/test",
    ),
  )
