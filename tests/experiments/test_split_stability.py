"""Every split of private data is neighbour-stable: adding or removing one
record moves no other record (independent per-record coins), or, for the
rules that keep an exact count, changes the selection by at most one record
in and one out and its complement by exactly one record.

Records are followed by their content (they are all distinct here), so the
insertion in the middle, which shifts every later index, is visible to a
rule that depends on positions: the permutation rule these splits replaced
fails the same check (the last test).
"""

import collections

import ml_collections
import numpy as np
import pytest

from experiments.reproductions import tuning_digits
from experiments.tasks import common
from experiments.tuning import trials
from zoprivacy.data import splits, stable_split
from zoprivacy.data.loaders import Dataset, load_digits, mezo_tasks
from zoprivacy.data.loaders.base import text_array


def _images(n=600, k=3, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.random((n, 4, 4, 1), dtype=np.float32)
  return Dataset(x, np.arange(n, dtype=np.int32) % k, k, "synthetic")


def _ids(inputs) -> collections.Counter:
  """The multiset of records (digits holds a few identical images)."""
  return collections.Counter(stable_split.record_bytes(inputs))


def _neighbours(ds: Dataset):
  """``(name, neighbour)``: ``ds`` with one new record inserted in the
  middle, and ``ds`` without its first, middle and last records."""
  mid = len(ds) // 2
  if ds.inputs.dtype == object:
    extra = text_array(["a new record"])
  else:  # a copy of the first record, brightened: a new record
    extra = np.minimum(ds.inputs[:1] + 0.5, 1.0).astype(ds.inputs.dtype)
  added = Dataset(
    np.concatenate([ds.inputs[:mid], extra, ds.inputs[mid:]]),
    np.concatenate([ds.labels[:mid], ds.labels[:1], ds.labels[mid:]]),
    ds.num_classes,
    ds.name,
  )
  out = [("added", added)]
  for i in (0, mid, len(ds) - 1):
    keep = np.delete(np.arange(len(ds)), i)
    out.append((f"removed {i}", ds.subset(keep)))
  return out


def _diff(a: collections.Counter, b: collections.Counter) -> int:
  return sum(((a - b) + (b - a)).values())


def _check_coins(split, ds: Dataset):
  """``split(ds) -> {part: multiset of records}``: each neighbour's parts
  differ from ``ds``'s by the added or removed record only."""
  base = split(ds)
  for name, other in _neighbours(ds):
    changed = sum(_diff(base[p], split(other)[p]) for p in base)
    assert changed == 1, f"{name}: {changed} record-part changes, not 1"


def _check_selection(select, ds: Dataset):
  """``select(ds) -> multiset of records``, a fixed count: a neighbour's
  selection differs by at most one record in and one out, and the rest
  (the complement) by exactly one record."""
  base, every = select(ds), _ids(ds.inputs)
  for name, other in _neighbours(ds):
    chosen, all_other = select(other), _ids(other.inputs)
    assert chosen.total() == base.total()
    assert _diff(chosen, base) <= 2, name
    assert _diff(all_other - chosen, every - base) == 1, name


def _as_sets(parts: dict[str, Dataset]) -> dict[str, set]:
  return {k: _ids(v.inputs) for k, v in parts.items()}


def test_public_private_split():
  def split(ds):
    s = splits.split_public_private(ds, 0.3, seed=5)
    return _as_sets({"public": s.public, "private": s.private})

  _check_coins(split, _images())
  _check_coins(split, load_digits().train)


def test_imbalanced_public_private_split():
  def split(ds):
    s = splits.pazo_cifar10_split(ds, 10.0, seed=2, public_fraction=0.1)
    return _as_sets({"public": s.public, "private": s.private})

  ds = _images(n=2000, k=10)
  _check_coins(split, ds)


def test_tuning_validation_split():
  def split(ds):
    task = common.flax_task(None, ds, ds.subset(np.arange(2)), None)
    task = trials.validation_split(task, 0.2, seed=0)
    return {
      "train": _ids(task.train_inputs),
      "validation": _ids(task.test_inputs),
    }

  _check_coins(split, _images())


def test_tuning_reproduction_private_half():
  def split(ds):
    s = splits.split_public_private(
      ds, 1.0 - tuning_digits.PRIVATE_FRACTION, seed=101
    )
    return _as_sets({"public": s.public, "private": s.private})

  _check_coins(split, load_digits().train)


def test_few_shot_selection():
  def select(ds):
    return _ids(splits.few_shot_subsample(ds, 40, seed=3).inputs)

  _check_selection(select, _images())


def test_held_out_validation_of_a_task():
  """Without few-shot, the training part of two neighbouring pools differs
  by exactly one record (the run's guarantee holds for the pool)."""
  config = ml_collections.ConfigDict(
    {"eval_split": "validation", "validation_size": 100, "seed": 4}
  )

  def select(ds):
    _, val = common.train_eval_split(config, ds, ds)
    return _ids(val.inputs)

  _check_selection(select, _images())


def test_held_out_validation_beside_few_shot():
  config = ml_collections.ConfigDict(
    {
      "eval_split": "validation",
      "validation_size": 50,
      "examples_per_class": 30,
      "seed": 4,
    }
  )

  def select(ds):
    train, _ = common.train_eval_split(config, ds, ds)
    return _ids(train.inputs)

  _check_selection(select, _images())


@pytest.mark.parametrize("per_class", [True, False])
def test_language_model_example_samples(per_class):
  def select(ds):
    examples = [
      {"text": t, "label": int(y)} for t, y in zip(ds.inputs, ds.labels)
    ]
    if per_class:
      chosen = mezo_tasks.sample_per_class(examples, 25, seed=7)
    else:
      chosen = mezo_tasks.sample_examples(examples, 80, seed=7)
    return _ids(text_array([e["text"] for e in chosen]))

  texts = text_array([f"sentence number {i}" for i in range(300)])
  ds = Dataset(texts, np.arange(300, dtype=np.int32) % 2, 2, "text")
  _check_selection(select, ds)


def test_the_check_catches_a_permutation_split():
  """The rule these splits replaced: a seeded permutation, its first 20%
  held out. Adding one record moves many others."""

  def split(ds):
    order = np.random.default_rng(11).permutation(len(ds))
    cut = len(ds) // 5
    held = ds.subset(np.sort(order[:cut]))
    rest = ds.subset(np.sort(order[cut:]))
    return _as_sets({"held": held, "rest": rest})

  with pytest.raises(AssertionError, match="record-part changes"):
    _check_coins(split, _images())
  base, moved = split(_images()), split(_neighbours(_images())[0][1])
  assert _diff(base["held"], moved["held"]) > 20  # 48 here


def test_identical_records_take_the_same_side():
  ds = _images(n=200)
  x = ds.inputs.copy()
  x[1::2] = x[0::2]  # every record twice
  u = stable_split.record_uniforms(x, seed=0, purpose="any")
  np.testing.assert_array_equal(u[0::2], u[1::2])
