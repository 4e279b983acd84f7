"""IMDB large movie review dataset (Maas et al., 2011): 25,000 / 25,000 reviews, binary.

PAZO setting (3): an LSTM trained from scratch on IMDB (private) with Amazon
Polarity as out-of-distribution public data (4% of the IMDB training size,
2,000 examples). PAZO's vocabulary is the top 10K tokens of the IMDB training
set; here it comes from public text only (:mod:`experiments.tasks.imdb`,
:mod:`zoprivacy.data.loaders.text`), as a vocabulary of the private texts
would release which words they contain.

Expected layout (``aclImdb_v1.tar.gz`` extracted)::

    aclImdb/
        train/pos/<id>_<rating>.txt   # rating 7..10
        train/neg/<id>_<rating>.txt   # rating 1..4
        test/pos/...  test/neg/...
        (train/unsup/ is ignored)

Labels: 0 = negative, 1 = positive. Files are read in (class, id) order.
"""

from __future__ import annotations

import re
from pathlib import Path

from zoprivacy.data.loaders import base

SUBDIR = "aclImdb"
CLASS_NAMES = ("neg", "pos")
INSTRUCTIONS = (
  "download https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz "
  "and extract it (`tar xzf aclImdb_v1.tar.gz`), which creates aclImdb/"
)
_NAME = re.compile(r"^(\d+)_(\d+)\.txt$")


def imdb_dir(data_dir: base.PathLike | None = None) -> Path:
  return base.find_dir_with(
    tuple(f"{s}/{c}" for s in ("train", "test") for c in CLASS_NAMES),
    base.candidate_dirs(SUBDIR, data_dir),
    "IMDB",
    INSTRUCTIONS,
  )


def _load_split(root: Path, split: str) -> base.Dataset:
  texts, labels = [], []
  for label, cls in enumerate(CLASS_NAMES):
    entries = []
    for p in (root / split / cls).iterdir():
      m = _NAME.match(p.name)
      if m is None:
        continue
      rating = int(m.group(2))
      if (cls == "pos") != (rating >= 5):
        raise ValueError(f"{p}: rating {rating} inconsistent with folder {cls}")
      entries.append((int(m.group(1)), p))
    for _, p in sorted(entries):
      texts.append(p.read_text(encoding="utf-8"))
      labels.append(label)
  return base.Dataset(
    base.text_array(texts),
    base.as_labels(labels),
    2,
    f"imdb/{split}",
    CLASS_NAMES,
  )


def load_imdb(data_dir: base.PathLike | None = None) -> base.DatasetSplits:
  """Loads IMDB reviews as ``object`` arrays of raw text (HTML ``<br />`` kept;
  :func:`zoprivacy.data.loaders.text.tokenize` strips it)."""
  root = imdb_dir(data_dir)
  return base.DatasetSplits(
    _load_split(root, "train"), _load_split(root, "test")
  )
