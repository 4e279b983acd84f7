"""Pieces shared by the task builders: splits, Flax tasks, checkpoint folders."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from experiments import xla_options
from experiments.tasks.task import Task
from zoprivacy.data import splits as splits_lib
from zoprivacy.data import stable_split
from zoprivacy.data.loaders import Dataset, MissingDataError

HF_FILES = ("config.json", "model.safetensors", "tokenizer.json")
# The fields train_eval_split reads; image_public_split's, and its splits
# (the values of config.public an image task accepts).
EVAL_FIELDS = ("eval_split", "test_size")
IMAGE_PUBLIC_FIELDS = ("public_fraction", "public_imbalance_ratio")
IMAGE_SPLITS = ("imbalanced4", "stratified4")


def data_seed(config) -> int:
  return int(config.get("data_seed", config.get("seed", 0)) or 0)


def train_eval_split(
  config, train: Dataset, test: Dataset, few_shot=splits_lib.few_shot_indices
) -> tuple[Dataset, Dataset]:
  """Few-shot subsample of the (private) training pool and the evaluation set.

  * ``examples_per_class=k``: the ``k`` examples per class of smallest keyed
    hash (:func:`zoprivacy.data.splits.few_shot_subsample`): the private
    training set; neighbouring pools give selections that differ by at most
    one example in and one out. ``few_shot``: another rule with that
    signature and guarantee (TREC: at most ``k`` per class,
    :func:`zoprivacy.data.loaders.lm_bff.at_most_k_per_class`).
  * ``eval_split="validation"``: the ``validation_size`` examples of
    smallest keyed hash (:mod:`zoprivacy.data.stable_split`, another key)
    among the pool's examples that are not training examples. Without
    few-shot they leave the training set, which then changes by exactly one
    example between neighbouring pools: the run's guarantee holds for the
    pool. The validation part is private evaluation data: its accuracy is
    reported exactly, named ``private_validation_accuracy`` and labelled
    "not private, not accounted" by every report
    (:func:`experiments.run.metrics.evaluates_private_records`).
  * otherwise the test set (evaluation data, not protected), subsampled to
    ``test_size`` if set.
  """
  seed = data_seed(config)
  per_class = config.get("examples_per_class")
  all_idx = np.arange(len(train))
  if per_class:
    chosen = few_shot(train, int(per_class), seed)
  else:
    chosen = all_idx
  eval_split = config.get("eval_split") or "test"
  if eval_split == "validation":
    size = int(config.get("validation_size") or 1000)
    pool = np.setdiff1d(all_idx, chosen) if per_class else chosen
    if size > len(pool) - (0 if per_class else 1):
      raise ValueError(
        f"validation_size={size} but only {len(pool)} held-out examples"
      )
    u = stable_split.record_uniforms(
      train.inputs, seed=seed, purpose="validation"
    )
    val = pool[stable_split.lowest(u[pool], size)]
    if not per_class:
      chosen = np.setdiff1d(chosen, val)
    return (
      train.subset(np.sort(chosen), f"{train.name}/train"),
      train.subset(val, f"{train.name}/validation"),
    )
  if eval_split != "test":
    raise ValueError(
      f"eval_split must be 'test' or 'validation', got {eval_split!r}"
    )
  test_size = config.get("test_size")
  if test_size and int(test_size) < len(test):
    rng = np.random.default_rng(seed + 7)
    test = test.subset(
      np.sort(rng.choice(len(test), int(test_size), replace=False))
    )
  return train.subset(np.sort(chosen)), test


#: Every function that builds a task's public set, by qualified name: each
#: is ``builder(config, pool) -> (private, public)``, ``pool`` the task's
#: private training pool, ``public`` None without ``config.public``. The
#: public set is a function of public data alone (no private record can
#: change it); private rows that duplicate a public input leave the private
#: side. ``tests/experiments/test_public_sets.py`` finds these functions in
#: the source and checks each one.
PUBLIC_SET_BUILDERS: dict[str, Callable] = {}


def public_set_builder(builder: Callable) -> Callable:
  """Registers ``builder`` in :data:`PUBLIC_SET_BUILDERS`."""
  PUBLIC_SET_BUILDERS[f"{builder.__module__}.{builder.__qualname__}"] = builder
  return builder


@public_set_builder
def image_public_split(
  config, train: Dataset
) -> tuple[Dataset, Dataset | None]:
  """``(private, public)``: PAZO's 4% public split of an image training set.

  ``public="imbalanced4"``: 4% (``public_fraction``) in expectation with an
  exponential class imbalance of ratio ``public_imbalance_ratio`` (default
  10; PAZO CIFAR-10, :func:`~zoprivacy.data.splits.pazo_cifar10_split`).
  ``"stratified4"``: 4% of every class in expectation (PAZO Tiny-ImageNet,
  20 per class on average). Each image is public by a keyed coin of its own
  (neighbour-stable, :func:`~zoprivacy.data.splits.split_public_private`):
  the private part is private, the public part public. Public rows are
  removed from the private set, and so are private rows that duplicate a
  public input (the public part is never trimmed by a private record); an
  empty public part is refused.
  """
  public = config.get("public") or ""
  if not public:
    return train, None
  fraction = float(
    config.get("public_fraction") or splits_lib.PAZO_PUBLIC_FRACTION
  )
  if public == "imbalanced4":
    split = splits_lib.pazo_cifar10_split(
      train,
      float(config.get("public_imbalance_ratio") or 10.0),
      data_seed(config),
      public_fraction=fraction,
      on_overlap="drop",
    )
  elif public == "stratified4":
    split = splits_lib.split_public_private(
      train, fraction, None, data_seed(config), on_overlap="drop"
    )
  else:
    raise ValueError(
      f"public={public!r} for an image task; use 'imbalanced4', "
      "'stratified4' or ''"
    )
  if len(split.public) == 0:
    raise ValueError(
      f"The public split ({public}, fraction {fraction:g}) of "
      f"{len(train)} training examples came out empty: each example is "
      "public by its own keyed coin. Raise public_fraction or use more data."
    )
  return split.private, split.public


def flax_task(
  model,
  train: Dataset,
  test: Dataset,
  public: Dataset | None,
  encode: Callable[[Dataset], Any] = lambda d: d.inputs,
  call: Callable[[Any, Any, Any], Any] = None,
) -> Task:
  """A task whose parameters are all trainable (``frozen = {}``)."""
  x_train = encode(train)
  sample = jax.tree.map(lambda a: a[:1], x_train)
  call = call or (lambda m, params, inputs: m.apply(params, inputs))

  def init(key):
    return xla_options.jit(lambda k: call_init(model, k, sample))(key), {}

  def apply(trainable, frozen, inputs):
    del frozen
    return call(model, trainable, inputs)

  return encoded_task(train, test, public, encode, init, apply, x_train=x_train)


def encoded_task(
  train: Dataset,
  test: Dataset,
  public: Dataset | None,
  encode: Callable[[Dataset], Any],
  init: Callable,
  apply: Callable,
  *,
  x_train: Any = None,
) -> Task:
  """The task of the model ``init`` / ``apply`` on ``train``, ``test`` and
  ``public`` (None: no public data) as ``encode`` turns each into inputs,
  with their labels and ``train``'s classes. ``x_train``: ``encode(train)``
  when the caller has it already (it is not encoded again)."""
  return Task(
    encode(train) if x_train is None else x_train,
    train.labels,
    encode(test),
    test.labels,
    train.num_classes,
    init,
    apply,
    public_inputs=None if public is None else encode(public),
    public_labels=None if public is None else public.labels,
  )


def call_init(model, key, sample):
  if isinstance(sample, dict):
    return model.init(key, **sample)
  return model.init(key, sample)


def model_kwargs(config, model: Callable | None = None) -> dict:
  """``config.model_kwargs`` as keyword arguments (lists as tuples). With
  ``model`` (the class or function they go to), a name it does not take is
  a ``ValueError`` that names the close ones, before anything is built."""
  kw = config.get("model_kwargs") or {}
  kw = {
    k: (tuple(v) if isinstance(v, list) else v) for k, v in dict(kw).items()
  }
  if model is not None:
    _check_names(model, kw)
  return kw


def _check_names(model: Callable, kw: dict) -> None:
  parameters = inspect.signature(model).parameters
  if any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
    return
  accepted = [n for n in parameters if n not in ("parent", "name")]
  unknown = [k for k in kw if k not in accepted]
  if not unknown:
    return
  hints = []
  for k in unknown:
    close = difflib.get_close_matches(str(k), accepted, n=1)
    hints.append(repr(k) + (f" (did you mean {close[0]!r}?)" if close else ""))
  title = getattr(model, "__name__", repr(model))
  raise ValueError(
    f"config.model_kwargs: {title} does not take {', '.join(hints)}; "
    f"it takes {', '.join(sorted(accepted))}."
  )


def require_hf_dir(model_dir, what: str, how: str) -> Path:
  """``model_dir`` if it holds ``config.json``, ``model.safetensors`` and
  ``tokenizer.json``; else :class:`MissingDataError` naming the missing files."""
  if not model_dir:
    raise MissingDataError(
      what,
      [f"<config.model_dir>/{f}" for f in HF_FILES],
      f"config.model_dir is not set. {how}",
    )
  root = Path(model_dir).expanduser()
  missing = [root / f for f in HF_FILES if not (root / f).exists()]
  if missing:
    raise MissingDataError(what, missing, how)
  return root
