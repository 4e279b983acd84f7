"""Data of the PAZO Table 1 analog: the private pool and the public splits.

Fashion-MNIST's 60,000 training images are split once (data seed 0) into
about 2,400 public images (4% in expectation, exponential class imbalance
of ratio 10, PAZO's CIFAR-10 protocol; each image public by a keyed coin
of its own, :func:`zoprivacy.data.splits.split_public_private`) and the
private rest. The public images are split
again into

* **public-validation**: ``VAL_PER_CLASS`` images of every class (balanced,
  like the test set, which is a public fact about Fashion-MNIST);
* **public-train**: the rest (imbalanced).

Two tasks are registered with :func:`experiments.tasks.register`:

* ``pazo_table1_private``: trains on the private pool, public batches from
  all 2,400 public images, evaluates on the test set (final runs);
* ``pazo_table1_selection``: trains on public-train as if it were private,
  draws the public batches from public-train too, evaluates on
  public-validation (step-size selection and the step-budget curve). It
  never touches the private pool or the test set.

The split is cached per process, so a grid of runs loads and splits the
data once.
"""

from __future__ import annotations

import functools

import ml_collections
import numpy as np

from experiments import tasks
from experiments.tasks.common import flax_task, image_public_split
from zoprivacy.data import loaders
from zoprivacy.data.loaders import Dataset
from zoprivacy.models import small

DATA_SEED = 0
VAL_PER_CLASS = 30
PRIVATE_TASK = "pazo_table1_private"
SELECTION_TASK = "pazo_table1_selection"


@functools.cache
def splits(
  data_dir: str = "", val_per_class: int = VAL_PER_CLASS
) -> dict[str, Dataset]:
  """``private``, ``public``, ``public_train``, ``public_val``, ``test``."""
  data = loaders.load_fashion_mnist(data_dir or None)
  split_config = ml_collections.ConfigDict(
    {
      "public": "imbalanced4",
      "public_fraction": 0.04,
      "public_imbalance_ratio": 10.0,
      "data_seed": DATA_SEED,
    }
  )
  private, public = image_public_split(split_config, data.train)
  rng = np.random.default_rng([DATA_SEED, 11])
  val = []
  for c in range(public.num_classes):
    members = np.flatnonzero(public.labels == c)
    if len(members) <= val_per_class:
      raise ValueError(
        f"class {c} has {len(members)} public images, too few "
        f"for {val_per_class} validation images per class"
      )
    val.append(rng.choice(members, val_per_class, replace=False))
  val = np.sort(np.concatenate(val))
  train = np.setdiff1d(np.arange(len(public)), val)
  return {
    "private": private,
    "public": public,
    "test": data.test,
    "public_train": public.subset(train, "fashion_mnist/public_train"),
    "public_val": public.subset(val, "fashion_mnist/public_val"),
  }


@functools.cache
def _task(kind: str, data_dir: str, features: tuple[int, ...]) -> tasks.Task:
  s = splits(data_dir)
  model = small.SmallCNN(num_classes=s["test"].num_classes, features=features)
  build = flax_task
  if kind == PRIVATE_TASK:
    return build(model, s["private"], s["test"], s["public"])
  return build(model, s["public_train"], s["public_val"], s["public_train"])


def _features(config) -> tuple[int, ...]:
  return tuple(int(f) for f in config.model_kwargs.features)


@tasks.register(PRIVATE_TASK)
def private_task(config) -> tasks.Task:
  return _task(PRIVATE_TASK, config.get("data_dir") or "", _features(config))


@tasks.register(SELECTION_TASK)
def selection_task(config) -> tasks.Task:
  return _task(SELECTION_TASK, config.get("data_dir") or "", _features(config))


def describe() -> str:
  """One line with the sizes and class counts of the splits."""
  s = splits()
  counts = np.bincount(s["public"].labels, minlength=10)
  return (
    f"private {len(s['private']):,}, public {len(s['public']):,} "
    f"(class counts {counts.min()}-{counts.max()}), public-train "
    f"{len(s['public_train']):,}, public-validation "
    f"{len(s['public_val']):,} ({VAL_PER_CLASS} per class), test "
    f"{len(s['test']):,}"
  )
