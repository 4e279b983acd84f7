"""No private record can change a public set.

The builders are found in the source, not listed by hand: every function of
``experiments/`` and ``zoprivacy/`` that calls a function of
:mod:`zoprivacy.data.splits` taking ``on_overlap`` (a split that yields a
public set, or an overlap rule) must be a registered public-set builder
(:data:`experiments.tasks.common.PUBLIC_SET_BUILDERS`), and every registered
builder must have a fixture here. Each builder then gets its private pool
with one added record that copies a public input under every other label:
its public set must not change (or, where the record's own coin makes it
public, grow by that record alone), and its private set must change by at
most that record.
"""

import ast
import collections
import importlib
import inspect
import json
import pathlib

import ml_collections
import numpy as np
import pytest
from vader_files import write_vader

from experiments import tasks  # noqa: F401  (registers the task builders)
from experiments.reproductions import tuning_digits  # noqa: F401  (a builder)
from experiments.tasks import common
from zoprivacy.data import splits, stable_split
from zoprivacy.data.loaders import Dataset
from zoprivacy.data.loaders.base import text_array

ROOT = pathlib.Path(__file__).parents[2]
SPLIT_API = {
  name
  for name, fn in vars(splits).items()
  if inspect.isfunction(fn)
  and fn.__module__ == splits.__name__
  and "on_overlap" in inspect.signature(fn).parameters
}


def _callers_of_split_api() -> set[str]:
  """``module.qualname`` of every function that calls the split API."""
  found = set()
  for path in [
    *ROOT.glob("experiments/**/*.py"),
    *ROOT.glob("zoprivacy/**/*.py"),
  ]:
    if path == ROOT / "zoprivacy" / "data" / "splits.py":
      continue
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
      if not isinstance(node, ast.FunctionDef):
        continue
      for call in ast.walk(node):
        if not isinstance(call, ast.Call):
          continue
        f = call.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in SPLIT_API:
          found.add(f"{module}.{node.name}")
  return found


def _images(n=400, k=10):
  x = np.random.default_rng(0).random((n, 4, 4, 1), dtype=np.float32)
  return Dataset(x, np.arange(n, dtype=np.int32) % k, k, "images")


def _texts(n, k, pairs=False):
  rows = [f"private sentence {i}" for i in range(n)]
  inputs = text_array([(r, f"hypothesis {i}") for i, r in enumerate(rows)])
  if not pairs:
    inputs = text_array(rows)
  return Dataset(inputs, np.arange(n, dtype=np.int32) % k, k, "private")


def _config(**fields):
  return ml_collections.ConfigDict({"data_seed": 0, **fields})


def _amazon(tmp):
  rows = [f'"{1 + i % 2}","title {i}","public review {i}"' for i in range(12)]
  (tmp / "train.csv").write_text("\n".join(rows) + "\n")
  (tmp / "test.csv").write_text('"1","t","x"\n')
  return [_config(public="amazon", public_size=5, data_dir=str(tmp))], _texts(
    40, 2
  )


def _snli(tmp):
  d = tmp / "snli_1.0"
  d.mkdir()
  gold = ("entailment", "neutral", "contradiction")
  rows = [
    {"gold_label": gold[i % 3], "sentence1": f"p {i}", "sentence2": f"h {i}"}
    for i in range(12)
  ]
  for split in ("train", "test"):
    (d / f"snli_1.0_{split}.jsonl").write_text(
      "\n".join(json.dumps(r) for r in rows) + "\n"
    )
  config = _config(public="snli", public_per_class=2, data_dir=str(tmp))
  return [config], _texts(30, 3, pairs=True)


def _vader(tmp):
  write_vader(tmp)
  config = _config(
    public="amazon+tweets",
    public_size=6,
    data_dir=str(tmp),
    dataset="vader_minilm",
  )
  return [config], _texts(30, 2)


# builder -> (tmp_path -> (configs, private pool)); uniform: every copy of
# a public input is public by its own coin (one public rate for all classes).
FIXTURES = {
  "experiments.tasks.common.image_public_split": (
    lambda tmp: (
      [
        _config(public="imbalanced4", public_fraction=0.1),
        _config(public="stratified4", public_fraction=0.1),
      ],
      _images(),
    )
  ),
  "experiments.tasks.imdb.imdb_public": _amazon,
  "experiments.tasks.minilm.vader_public": _vader,
  "experiments.tasks.roberta_prompts.snli_public": _snli,
  "experiments.reproductions.tuning_digits.public_half": (
    lambda tmp: ([_config(seed=0)], _images())
  ),
}
UNIFORM = {"experiments.reproductions.tuning_digits.public_half"}


def test_every_caller_of_the_split_api_is_a_registered_builder():
  callers = _callers_of_split_api()
  assert "experiments.tasks.common.image_public_split" in callers
  registered = set(common.PUBLIC_SET_BUILDERS)
  for name in callers:
    importlib.import_module(name.rsplit(".", 1)[0])
  assert callers <= set(common.PUBLIC_SET_BUILDERS), callers - registered
  assert set(FIXTURES) == set(common.PUBLIC_SET_BUILDERS)


def _records(ds: Dataset | None) -> collections.Counter:
  rows = stable_split.record_bytes(ds.inputs)
  return collections.Counter(zip(rows, ds.labels.tolist()))


def _with_copy(pool: Dataset, inputs, label: int) -> Dataset:
  mid = len(pool) // 2
  return Dataset(
    np.concatenate([pool.inputs[:mid], inputs, pool.inputs[mid:]]),
    np.concatenate([pool.labels[:mid], [label], pool.labels[mid:]]).astype(
      np.int32
    ),
    pool.num_classes,
    pool.name,
  )


@pytest.mark.filterwarnings("ignore::zoprivacy.data.splits.DataOverlapWarning")
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_a_private_copy_of_a_public_record_changes_no_public_set(
  name, tmp_path
):
  builder = common.PUBLIC_SET_BUILDERS[name]
  configs, pool = FIXTURES[name](tmp_path)
  private_copies = 0
  for config in configs:
    private, public = builder(config, pool)
    assert public is not None and len(public) > 0
    base_public, base_private = _records(public), _records(private)
    for label in range(pool.num_classes):
      if label == public.labels[0]:
        continue
      added = _with_copy(pool, public.inputs[:1], label)
      record = next(iter(_records(added.subset([len(pool) // 2]))))
      new_private, new_public = builder(config, added)
      grown = _records(new_public) - base_public
      assert not base_public - _records(new_public), (name, label)
      assert grown in ({}, {record: 1}), (name, label)
      private_copies += not grown
      moved = (_records(new_private) - base_private) + (
        base_private - _records(new_private)
      )
      assert sum(moved.values()) <= 1, (name, label)
  assert private_copies > 0 or name in UNIFORM, name
