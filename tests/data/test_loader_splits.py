"""Every loader that places records itself is neighbour-stable.

The loaders are found, not listed: every function of
``zoprivacy.data.loaders`` that takes a ``seed`` decides by it which record
goes where (a train/test split, a sample), and each needs a check here.
Each check adds one new record in the middle of the raw data and removes the
first, middle and last records, and follows the records by content (an
insertion shifts every later index): a split by coins must move no record
but the one added or removed; a fixed-size sample (the ``k`` smallest keyed
hashes) may change by at most one record in and one out. No loader module
may draw from a seeded generator (the rule these replaced: on digits a
seeded stratified shuffle moved 65 other images between the parts when
one was added).
"""

import collections
import importlib
import inspect
import pathlib
import pkgutil

import numpy as np
import pytest
import sklearn.datasets

from zoprivacy.data import loaders
from zoprivacy.data.loaders import (
  amazon_polarity,
  base,
  digits,
  lm_bff,
  mezo_tasks,
  vader,
)

ROOT = pathlib.Path(loaders.__file__).parent


def _modules():
  for info in pkgutil.iter_modules(loaders.__path__):
    yield importlib.import_module(f"{loaders.__name__}.{info.name}")


def _seeded_functions() -> set[str]:
  return {
    f"{m.__name__.rsplit('.', 1)[1]}.{name}"
    for m in _modules()
    for name, fn in vars(m).items()
    if inspect.isfunction(fn)
    and fn.__module__ == m.__name__
    and "seed" in inspect.signature(fn).parameters
  }


def _neighbours(rows: list):
  """``(name, rows')``: one new record inserted in the middle, and the
  first, middle and last records removed."""
  mid = len(rows) // 2
  yield "added", rows[:mid] + ["NEW"] + rows[mid:]
  for i in (0, mid, len(rows) - 1):
    yield f"removed {i}", rows[:i] + rows[i + 1 :]


def _diff(a: collections.Counter, b: collections.Counter) -> int:
  return sum(((a - b) + (b - a)).values())


def _check_coins(load, rows):
  """``load(rows) -> {part: Counter of records}``: a neighbour's parts
  differ from the base's by the one record added or removed."""
  base_parts = load(rows)
  for name, other in _neighbours(rows):
    parts = load(other)
    changed = sum(_diff(base_parts[p], parts[p]) for p in base_parts)
    assert changed == 1, f"{name}: {changed} record-part changes, not 1"


def _check_sample(load, rows):
  """``load(rows) -> Counter``, a sample of fixed size: a neighbour's
  sample differs by at most one record in and one out."""
  base_sample = load(rows)
  for name, other in _neighbours(rows):
    assert _diff(load(other), base_sample) <= 2, name


def _parts(splits) -> dict:
  return {
    "train": collections.Counter(map(_key, splits.train.inputs)),
    "test": collections.Counter(map(_key, splits.test.inputs)),
  }


def _key(record):
  return record.tobytes() if isinstance(record, np.ndarray) else str(record)


def _digits(monkeypatch):
  raw = sklearn.datasets.load_digits()
  rows = list(zip(raw.images, raw.target))
  new = (np.minimum(raw.images[0] + 4.0, 16.0), raw.target[0])

  def load(rows):
    rows = [new if r == "NEW" else r for r in rows]
    images = np.stack([img for img, _ in rows])
    target = np.asarray([y for _, y in rows])
    # the loader reads scikit-learn's bundled file (_bundled_digits)
    monkeypatch.setattr(digits, "_bundled_digits", lambda: (images, target))
    return _parts(loaders.load_digits(seed=0))

  return _check_coins, load, rows


def _vader(tmp_path, loader):
  folder = tmp_path / "vader" / "hutto_ICWSM_2014"
  folder.mkdir(parents=True)
  for corpus in vader.PUBLIC_CORPORA:
    (folder / f"{corpus}_GroundTruth.txt").write_text("p1\t1.5\tpublic text")
  path = folder / "movieReviewSnippets_GroundTruth.txt"
  rows = [f"{i}\t{(-1.5) ** (i % 2)}\treview number {i}" for i in range(120)]

  def load(rows):
    rows = ["x\t2.0\ta brand new review" if r == "NEW" else r for r in rows]
    path.write_text("\n".join(rows))
    splits = loader(cache_dir=tmp_path / "vader", seed=3)
    return _parts(
      splits[0] if loader is vader.load_vader_private_public else splits
    )

  return _check_coins, load, rows


def _amazon(tmp_path, train: bool):
  rows = [f'"{1 + i % 2}","title {i}","review {i}"' for i in range(80)]

  def load(rows):
    rows = ['"2","new","a brand new review"' if r == "NEW" else r for r in rows]
    (tmp_path / "train.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "test.csv").write_text('"1","t","x"\n')
    if train:
      ds = amazon_polarity.load_amazon_polarity(
        tmp_path, train_sample_size=20, seed=4
      ).train
    else:
      ds = amazon_polarity.read_amazon_csv(
        tmp_path / "train.csv", sample_size=20, seed=4
      )
    return collections.Counter(ds.inputs)

  return _check_sample, load, rows


def _examples(select):
  rows = [{"text": f"sentence {i}", "label": i % 2} for i in range(200)]

  def load(rows):
    rows = [
      {"text": "a new one", "label": 1} if r == "NEW" else r for r in rows
    ]
    return collections.Counter(e["text"] for e in select(rows))

  return _check_sample, load, rows


def _held_out(_):
  rows = [f"record {i}" for i in range(300)]

  def load(rows):
    inputs = base.text_array(rows)
    train, test = base.held_out_split(inputs, 0.25, seed=1)
    return {
      "train": collections.Counter(inputs[train]),
      "test": collections.Counter(inputs[test]),
    }

  return _check_coins, load, rows


CHECKS = {
  "digits.load_digits": lambda tmp, mp: _digits(mp),
  "vader.load_vader": lambda tmp, mp: _vader(tmp, vader.load_vader),
  "vader.load_vader_private_public": (
    lambda tmp, mp: _vader(tmp, vader.load_vader_private_public)
  ),
  "amazon_polarity.read_amazon_csv": lambda tmp, mp: _amazon(tmp, False),
  "amazon_polarity.load_amazon_polarity": lambda tmp, mp: _amazon(tmp, True),
  "mezo_tasks.sample_examples": lambda tmp, mp: _examples(
    lambda e: mezo_tasks.sample_examples(e, 40, seed=2)
  ),
  "mezo_tasks.sample_per_class": lambda tmp, mp: _examples(
    lambda e: mezo_tasks.sample_per_class(e, 15, seed=2)
  ),
  "base.held_out_split": lambda tmp, mp: _held_out(tmp),
  "lm_bff.at_most_k_per_class": lambda tmp, mp: _examples(_k_shot),
}


def _k_shot(rows):
  """LM-BFF's k-shot sample of ``rows`` (15 per class; class 2 has fewer
  and is taken whole)."""
  labels = [2 if r["text"].endswith("77") else r["label"] for r in rows]
  dataset = base.Dataset(
    base.text_array([r["text"] for r in rows]), np.array(labels), 3, "k-shot"
  )
  return [rows[i] for i in lm_bff.at_most_k_per_class(dataset, 15, seed=2)]


def test_every_seeded_loader_function_is_checked():
  assert _seeded_functions() == set(CHECKS)


def test_no_loader_draws_from_a_seeded_generator():
  for path in ROOT.glob("*.py"):
    text = path.read_text()
    for needle in ("default_rng", "np.random", "shuffle(", "permutation("):
      assert needle not in text, (path.name, needle)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_one_record_moves_no_other(name, tmp_path, monkeypatch):
  check, load, rows = CHECKS[name](tmp_path, monkeypatch)
  check(load, rows)
