"""VADER sentiment corpora (Hutto & Gilbert, ICWSM 2014), real human-rated text.

The vaderSentiment 3.3.2 *source* archive on PyPI ships
``additional_resources/hutto_ICWSM_2014.tar.gz``; its ``*_GroundTruth.txt``
files hold one sentence per line as ``id<TAB>mean_rating<TAB>text``, the rating
being the mean of human scores in ``[-4, 4]``:

=========================  ========  ==========================================
corpus                     lines     role here
=========================  ========  ==========================================
``movieReviewSnippets``    10,605    private data (Rotten Tomatoes, SST-like)
``amazonReviewSnippets``    3,708    out-of-distribution public data
``tweets``                  4,200    out-of-distribution public data
``nytEditorialSnippets``    5,190    available, unused by default
=========================  ========  ==========================================

Labels come from the sign of the mean rating (1 positive, 0 negative); exact
zeros are dropped. Movie reviews as private data with Amazon reviews / tweets
as public data mirrors PAZO's IMDB (private) / Amazon Polarity (OOD public)
setting for the LSTM text classifier, with data that can be fetched from a
package registry.

Fetch once with::

    python -m zoprivacy.data.loaders.vader --fetch [--cache-dir DIR]

which runs ``pip download --no-deps --no-binary :all: vaderSentiment==3.3.2``
into the cache directory (default ``~/.cache/zoprivacy/vader``, or
``$ZOPRIVACY_DATA_DIR/vader``), checks the archive's SHA-256 and extracts the
four ground-truth files into ``DIR/hutto_ICWSM_2014/``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from zoprivacy.data.loaders import base

SDIST_NAME = "vaderSentiment-3.3.2.tar.gz"
SDIST_SHA256 = (
  "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9"
)
INNER_ARCHIVE = (
  "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
)
EXTRACT_DIR = "hutto_ICWSM_2014"
CORPORA = (
  "movieReviewSnippets",
  "amazonReviewSnippets",
  "tweets",
  "nytEditorialSnippets",
)
PRIVATE_CORPUS = "movieReviewSnippets"
PUBLIC_CORPORA = ("amazonReviewSnippets", "tweets")
CLASS_NAMES = ("negative", "positive")
FETCH_COMMAND = (
  "python -m zoprivacy.data.loaders.vader --fetch --cache-dir {dir}"
)


def vader_cache_dir(cache_dir: base.PathLike | None = None) -> Path:
  """``cache_dir`` if given, else ``$ZOPRIVACY_DATA_DIR/vader``, else
  ``~/.cache/zoprivacy/vader``."""
  if cache_dir is not None:
    return Path(cache_dir).expanduser()
  return base.data_root() / "vader"


def _file_name(corpus: str) -> str:
  if corpus not in CORPORA:
    raise ValueError(f"unknown VADER corpus {corpus!r}; choose from {CORPORA}")
  return f"{corpus}_GroundTruth.txt"


def _sha256(path: Path) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      h.update(chunk)
  return h.hexdigest()


def extract_ground_truth(sdist: Path, out_dir: Path) -> Path:
  """Extracts the four ``*_GroundTruth.txt`` files of the nested ICWSM archive
  in ``sdist`` into ``out_dir/hutto_ICWSM_2014``; returns that folder."""
  target = out_dir / EXTRACT_DIR
  target.mkdir(parents=True, exist_ok=True)
  with tarfile.open(sdist, "r:gz") as outer:
    inner_bytes = outer.extractfile(INNER_ARCHIVE).read()
  with tarfile.open(fileobj=io.BytesIO(inner_bytes), mode="r:gz") as inner:
    members = {Path(m.name).name: m for m in inner.getmembers() if m.isfile()}
    for corpus in CORPORA:
      name = _file_name(corpus)
      if name not in members:
        raise ValueError(f"{sdist}: nested archive has no {name}")
      (target / name).write_bytes(inner.extractfile(members[name]).read())
  return target


def fetch(cache_dir: base.PathLike | None = None, verbose: bool = True) -> Path:
  """Downloads the vaderSentiment 3.3.2 sdist with pip into the cache directory,
  verifies its SHA-256 and extracts the ground-truth files. Returns the folder
  holding them. Needs access to a Python package index."""
  cache = vader_cache_dir(cache_dir)
  cache.mkdir(parents=True, exist_ok=True)
  sdist = cache / SDIST_NAME
  if not sdist.exists():
    cmd = [
      sys.executable,
      "-m",
      "pip",
      "download",
      "--no-deps",
      "--no-binary",
      ":all:",
      "vaderSentiment==3.3.2",
      "-d",
      str(cache),
    ]
    if verbose:
      print("running:", " ".join(cmd), file=sys.stderr)
    subprocess.run(
      cmd, check=True, stdout=None if verbose else subprocess.DEVNULL
    )
  digest = _sha256(sdist)
  if digest != SDIST_SHA256:
    raise ValueError(
      f"{sdist}: SHA-256 {digest} does not match the published "
      f"vaderSentiment 3.3.2 sdist ({SDIST_SHA256}); delete it and refetch"
    )
  target = extract_ground_truth(sdist, cache)
  if verbose:
    print(f"VADER corpora ready in {target}", file=sys.stderr)
  return target


def parse_ground_truth(
  text: str, source: str = "<text>"
) -> tuple[list, np.ndarray]:
  """Parses ``id<TAB>mean_rating<TAB>text`` lines; returns (texts, ratings)."""
  texts, ratings = [], []
  for lineno, line in enumerate(text.splitlines(), 1):
    line = line.strip("\r\n").lstrip("\ufeff")
    if not line.strip():
      continue
    parts = line.split("\t", 2)
    if len(parts) != 3:
      raise ValueError(
        f"{source}:{lineno}: expected 'id<TAB>rating<TAB>text', got {line!r}"
      )
    try:
      rating = float(parts[1])
    except ValueError as e:
      raise ValueError(
        f"{source}:{lineno}: rating {parts[1]!r} is not a number"
      ) from e
    texts.append(parts[2].strip())
    ratings.append(rating)
  return texts, np.asarray(ratings, dtype=np.float64)


def load_vader_corpus(
  corpus: str, cache_dir: base.PathLike | None = None
) -> base.Dataset:
  """One VADER corpus as a binary sentiment Dataset (label = rating > 0,
  zero ratings dropped), inputs an ``object`` array of sentences."""
  name = _file_name(corpus)
  cache = vader_cache_dir(cache_dir)
  path = cache / EXTRACT_DIR / name
  if not path.exists():
    sdist = cache / SDIST_NAME
    if sdist.exists() and _sha256(sdist) == SDIST_SHA256:
      extract_ground_truth(sdist, cache)
    else:
      raise base.MissingDataError(
        "VADER",
        [path],
        f"run `{FETCH_COMMAND.format(dir=cache)}` (needs access to PyPI), or set "
        "$ZOPRIVACY_DATA_DIR / pass cache_dir to a folder that holds "
        f"{EXTRACT_DIR}/{name}",
      )
  texts, ratings = parse_ground_truth(
    path.read_text(encoding="utf-8"), str(path)
  )
  keep = np.flatnonzero(ratings != 0.0)
  labels = base.as_labels(ratings[keep] > 0)
  return base.Dataset(
    base.text_array([texts[i] for i in keep]),
    labels,
    2,
    f"vader/{corpus}",
    CLASS_NAMES,
  )


def load_vader(
  corpus: str = PRIVATE_CORPUS,
  cache_dir: base.PathLike | None = None,
  test_fraction: float = 0.2,
  seed: int = 0,
) -> base.DatasetSplits:
  """A VADER corpus split into train/test (the corpora have no official
  split): each sentence is a test sentence by a keyed coin of its own at
  rate ``test_fraction`` (:func:`~zoprivacy.data.loaders.base.held_out_split`,
  public ``seed``), so adding or removing one sentence moves no other;
  identical sentences take the same side."""
  full = load_vader_corpus(corpus, cache_dir)
  train_idx, test_idx = base.held_out_split(full.inputs, test_fraction, seed)
  return base.DatasetSplits(
    full.subset(train_idx, f"vader/{corpus}/train"),
    full.subset(test_idx, f"vader/{corpus}/test"),
  )


def load_vader_private_public(
  cache_dir: base.PathLike | None = None,
  public_corpora: Sequence[str] = PUBLIC_CORPORA,
  test_fraction: float = 0.2,
  seed: int = 0,
) -> tuple[base.DatasetSplits, base.Dataset]:
  """Movie reviews (train/test) as private data, plus the concatenation of
  ``public_corpora`` as out-of-distribution public data (PAZO's IMDB/Amazon
  setting in miniature). Use :func:`zoprivacy.data.splits.sample_ood_public`
  to subsample the public pool and check it against the private set."""
  private = load_vader(PRIVATE_CORPUS, cache_dir, test_fraction, seed)
  parts = [load_vader_corpus(c, cache_dir) for c in public_corpora]
  public = base.Dataset(
    np.concatenate([p.inputs for p in parts]),
    np.concatenate([p.labels for p in parts]),
    2,
    "vader/" + "+".join(public_corpora),
    CLASS_NAMES,
  )
  return private, public


def _main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(
    prog="python -m zoprivacy.data.loaders.vader",
    description="Fetch or summarise the VADER sentiment corpora.",
  )
  parser.add_argument(
    "--fetch",
    action="store_true",
    help="download the vaderSentiment 3.3.2 sdist with pip and extract it",
  )
  parser.add_argument(
    "--cache-dir",
    default=None,
    help="cache folder (default $ZOPRIVACY_DATA_DIR/vader or "
    "~/.cache/zoprivacy/vader)",
  )
  args = parser.parse_args(argv)
  if args.fetch:
    fetch(args.cache_dir)
  counts: dict[str, tuple[int, int]] = {}
  for corpus in CORPORA:
    ds = load_vader_corpus(corpus, args.cache_dir)
    counts[corpus] = (
      int((ds.labels == 0).sum()),
      int((ds.labels == 1).sum()),
    )
  for corpus, (neg, pos) in counts.items():
    print(f"{corpus:22s} negative={neg:6d} positive={pos:6d}")
  return 0


if __name__ == "__main__":
  raise SystemExit(_main())
