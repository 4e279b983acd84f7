"""Amazon Review Polarity (Zhang et al., 2015): 3.6M / 400K reviews, binary.

PAZO setting (3): out-of-distribution public data for the IMDB LSTM (2,000
examples, 4% of the IMDB training size). Since the full training CSV is 1.5 GB,
:func:`load_amazon_polarity` can draw a sample while streaming instead of
holding all 3.6M reviews in memory: the reviews of smallest keyed hash
(:mod:`zoprivacy.data.stable_split`), so adding or removing one review
changes the sample by at most one review in and one out.

Expected layout (``amazon_review_polarity_csv.tgz`` extracted)::

    amazon_review_polarity_csv/
        train.csv   # "label","title","content" per line, label 1 = negative, 2 = positive,
        test.csv    # fields quoted with '"', inner quotes doubled, newlines written as \\n

Labels: 0 = negative, 1 = positive. Input text = ``title + " " + content``
(``join_title=False`` keeps only the content).
"""

from __future__ import annotations

import csv
import heapq
from pathlib import Path

from zoprivacy.data import stable_split
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
  """Reads one Amazon Polarity CSV; with ``sample_size`` keeps that many
  rows, in file order: those whose text has the smallest keyed hash
  (:func:`zoprivacy.data.stable_split.uniform`, public ``seed``; single
  pass). The selection depends on each row's own text, not on its position:
  adding or removing one row changes it by at most one row in and one out.
  ``head=n`` reads only the file's first ``n`` rows (and samples among
  them)."""
  key = stable_split.split_key(seed, "amazon polarity sample")
  kept = []  # heap of (-u, -row, label, text): the sample_size smallest u
  for i, (label, title, content) in enumerate(_rows(Path(path))):
    if head is not None and i >= head:
      break
    text = (
      (_clean(title) + " " + _clean(content)).strip()
      if join_title
      else _clean(content)
    )
    if sample_size is None:
      kept.append((0.0, -i, int(label) - 1, text))
      continue
    u = stable_split.uniform(text.encode("utf-8"), key)
    entry = (-u, -i, int(label) - 1, text)
    if len(kept) < sample_size:
      heapq.heappush(kept, entry)
    elif entry > kept[0]:
      heapq.heapreplace(kept, entry)
  rows = sorted((-e[1], e[2], e[3]) for e in kept)
  return base.Dataset(
    base.text_array([t for _, _, t in rows]),
    base.as_labels([l for _, l, _ in rows]),
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
  """Loads Amazon Polarity train/test, optionally as samples of each
  (:func:`read_amazon_csv`)."""
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
