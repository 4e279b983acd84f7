"""Inserted canaries: the membership secret of the attack experiment.

DP-ZO (Tang et al. 2024) Table 6 measures membership inference on
*inserted* canaries, because a small model trained on in-distribution data
barely overfits and a natural-example attack would say little. The
protocol here (also the one of Steinke, Nasr and Jagielski 2023, Alg. 1):

1. build ``m`` canaries that are hard to generalize to:

   * ``kind="mislabeled"``: real digits held out of the training pool, each
     relabeled with a class drawn uniformly from the nine *wrong* ones;
   * ``kind="ood"``: out-of-distribution inputs (pixels uniform in
     ``[0, 1]``, independently) with uniformly random labels;

2. draw the membership secret ``S_i ~ Bernoulli(1/2)`` independently per
   canary, from a FIXED seed: this is an attack experiment, the experimenter
   knows ``S`` and the audit's randomness is the experimenter's;
3. train on the base training set plus exactly the canaries with
   ``S_i = 1``; the attacker scores every canary and guesses ``S``.

The estimator's noise and batches are not affected by the seeds above: they
come from the run's own secret (or the explicit insecure test seed).

The data are scikit-learn's digits (bundled, offline), split once with a
fixed seed into the training pool and the test set; the split does not
depend on the model seed, so target and reference models share it.
"""

from __future__ import annotations

import dataclasses
import functools

import ml_collections
import numpy as np

from experiments import tasks
from experiments.tasks.common import flax_task
from zoprivacy.data import loaders
from zoprivacy.data.loaders import Dataset
from zoprivacy.models import small

TASK = "mia_digits"
DATA_SEED = 0
CANARY_KINDS = ("mislabeled", "ood")


@dataclasses.dataclass(frozen=True)
class CanarySet:
  """``m`` canaries and their membership secret.

  Attributes:
    inputs: ``[m, H, W, C]`` canary images.
    labels: ``[m]`` the labels they are trained (and scored) with.
    is_member: ``[m]`` bool, the secret ``S``: inserted in the training set.
    kind: ``"mislabeled"`` or ``"ood"``.
  """

  inputs: np.ndarray
  labels: np.ndarray
  is_member: np.ndarray
  kind: str

  def __len__(self) -> int:
    return len(self.labels)

  @property
  def num_members(self) -> int:
    return int(self.is_member.sum())


def draw_membership(num_canaries: int, *, seed: int) -> np.ndarray:
  """``S_i ~ Bernoulli(1/2)`` i.i.d., from the experimenter's fixed seed."""
  rng = np.random.default_rng([seed, 1])
  return rng.random(num_canaries) < 0.5


def make_canaries(
  pool: Dataset, *, num_canaries: int, kind: str, seed: int
) -> tuple[CanarySet, np.ndarray]:
  """Canaries and the indices of ``pool`` they use (to remove from it).

  ``mislabeled``: ``num_canaries`` seeded rows of ``pool`` with a label
  drawn uniformly from the other classes. ``ood``: uniform-noise images
  shaped like ``pool``'s, uniformly random labels; no pool row is used.
  """
  if kind not in CANARY_KINDS:
    raise ValueError(f"kind must be one of {CANARY_KINDS}, got {kind!r}.")
  if not 0 < num_canaries:
    raise ValueError(f"num_canaries must be positive, got {num_canaries}.")
  rng = np.random.default_rng([seed, 2])
  k = pool.num_classes
  if kind == "mislabeled":
    if num_canaries >= len(pool):
      raise ValueError(
        f"{num_canaries} canaries from a pool of {len(pool)} examples."
      )
    used = np.sort(rng.choice(len(pool), num_canaries, replace=False))
    inputs = pool.inputs[used]
    shift = rng.integers(1, k, size=num_canaries)  # never 0: a wrong label
    labels = (pool.labels[used] + shift) % k
  else:
    used = np.zeros([0], np.int64)
    shape = (num_canaries,) + pool.inputs.shape[1:]
    inputs = rng.random(shape).astype(pool.inputs.dtype)
    labels = rng.integers(0, k, size=num_canaries)
  membership = draw_membership(num_canaries, seed=seed)
  canaries = CanarySet(inputs, labels.astype(np.int32), membership, kind)
  return canaries, used


def insert_canaries(
  base: Dataset, canaries: CanarySet, *, include_members: bool = True
) -> Dataset:
  """``base`` followed by the member canaries (``S_i = 1``), in canary order.

  ``include_members=False`` returns ``base`` alone: the training set of a
  reference model, which holds no canary at all.
  """
  if not include_members or not canaries.num_members:
    return base
  rows = canaries.is_member
  return Dataset(
    np.concatenate([base.inputs, canaries.inputs[rows]]),
    np.concatenate([base.labels, canaries.labels[rows]]).astype(np.int32),
    base.num_classes,
    f"{base.name}+canaries",
    base.class_names,
  )


@functools.cache
def experiment_data(
  num_canaries: int, kind: str, seed: int
) -> tuple[Dataset, CanarySet, Dataset]:
  """``(base training set, canaries, test set)`` of one experiment.

  Cached per process: every run of a grid shares one split and one draw.
  """
  data = loaders.load_digits(seed=DATA_SEED)
  canaries, used = make_canaries(
    data.train, num_canaries=num_canaries, kind=kind, seed=seed
  )
  keep = np.setdiff1d(np.arange(len(data.train)), used)
  return data.train.subset(keep, "digits/base"), canaries, data.test


def canary_config(
  *, num_canaries: int, kind: str, seed: int, include_members: bool
) -> ml_collections.ConfigDict:
  """The ``config.canaries`` block that :func:`canary_task` reads."""
  return ml_collections.ConfigDict(
    {
      "num_canaries": int(num_canaries),
      "kind": kind,
      "seed": int(seed),
      "include_members": bool(include_members),
    }
  )


@tasks.register(TASK, fields=("canaries",))
def canary_task(config) -> tasks.Task:
  """Digits + inserted canaries, the small CNN of ``configs/default.py``.

  Reads ``config.canaries`` (:func:`canary_config`) and
  ``config.model_kwargs.features``.
  """
  c = config.canaries
  base, canaries, test = experiment_data(c.num_canaries, c.kind, c.seed)
  train = insert_canaries(
    base, canaries, include_members=bool(c.include_members)
  )
  features = tuple(int(f) for f in config.model_kwargs.features)
  model = small.SmallCNN(num_classes=base.num_classes, features=features)
  return flax_task(model, train, test, None)
