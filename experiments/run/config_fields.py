"""Which config fields a run reads; any other field is refused.

A run reads the fields of ``configs/default.py`` (the schema every config
is completed to: :mod:`experiments.run.config_defaults`), the fields its task declares (:data:`TASK_FIELDS`; a task
registered elsewhere declares its own with
``experiments.tasks.register(name, fields=...)``) and the fields its
estimator declares (``config_fields`` of its registry entry, in the JAX-free
manifest). A field outside these, set in a config file or on the command
line, would be ignored without a word (``c.num_step = 100`` leaves
``num_steps`` at 4000), so :func:`check` refuses it, naming the closest
field the run reads (or where a field of earlier releases moved: the
privacy settings are in the ``privacy`` block). Inside the fixed blocks
(``mesh``, ``distributed``, ``privacy``, ``hidden_state``) the keys are
checked the same way; the free-form blocks
(``estimator_kwargs``, ``model_kwargs``, ...) are checked against what they
are passed to.

:data:`PUBLIC_SPLITS` names the public data each task can provide
(``config.public``), so that an estimator that needs public data is
refused before anything loads when none is set, with the choices.

Importing this module imports nothing heavy: a command line runs the check
before JAX loads.
"""

from __future__ import annotations

import difflib
import functools

from configs import default
from experiments.run import privacy_config

# Fields every task reads: the public split and the public proxy
# (experiments/tasks/__init__.py, public_proxy.py) and the data seed.
COMMON = ("public", "data_seed", "validation_size", "examples_per_class")
# experiments.tasks.common.train_eval_split
EVAL = ("eval_split", "test_size")
IMAGE_PUBLIC = ("public_fraction", "public_imbalance_ratio")
LORA = ("lora_rank", "lora_alpha", "lora_targets")
ENCODER = ("model_dir", "max_length", "peft", *LORA, *EVAL)
CAUSAL_LM = (
  "model_dir",
  "model_family",
  "param_dtype",
  "peft",
  "num_prefix_tokens",
  *LORA,
  "max_new_tokens",
  "eval_batch_size",
  "max_length",
  "num_train",
  "num_eval",
)
# The prompt templates of zoprivacy.data.prompts: each is a task "<name>_opt".
PROMPT_TASKS = (
  "sst2",
  "sst5",
  "rte",
  "qnli",
  "mnli",
  "snli",
  "boolq",
  "trec",
  "cb",
  "copa",
  "wsc",
  "wic",
  "multirc",
  "record",
  "squad",
  "drop",
)

# Fields each built-in task reads beyond the default schema and COMMON.
TASK_FIELDS: dict[str, tuple[str, ...]] = {
  "digits": IMAGE_PUBLIC,
  "fashion_mnist": IMAGE_PUBLIC,
  "digits_public": IMAGE_PUBLIC,
  "fashion_mnist_public": IMAGE_PUBLIC + EVAL,
  "cifar10": IMAGE_PUBLIC + EVAL,
  "tiny_imagenet": IMAGE_PUBLIC + EVAL + ("max_per_class",),
  "imdb": (
    "public_size",
    "vocab",
    "vocab_size",
    "vocab_corpus_size",
    "max_length",
    *EVAL,
  ),
  "sst2": ENCODER + ("public_per_class",),
  "mnli": ENCODER + ("public_per_class",),
  "snli": ENCODER + ("public_per_class",),
  "sst5": ENCODER,
  "rte": ENCODER,
  "trec": ENCODER,
  "vader_minilm": ENCODER + ("precompute_features", "public_size"),
  "vader_llm": (
    "model_dir",
    "model_family",
    "param_dtype",
    "max_length",
    "peft",
    "num_prefix_tokens",
    *LORA,
    "trained_blocks",
    "state_cache",
    "state_cache_dir",
    "public_size",
    "public_per_class",
    *EVAL,
  ),
  "digits_logreg": ("l2", "radius"),
  "fashion_mnist_logreg": ("l2", "radius"),
  **{f"{name}_opt": CAUSAL_LM for name in PROMPT_TASKS},
}

IMAGE_SPLITS = ("imbalanced4", "stratified4")
# The values of ``config.public`` each task accepts ('' is always no public
# data); a task not listed provides none.
PUBLIC_SPLITS: dict[str, tuple[str, ...]] = {
  "digits": IMAGE_SPLITS,
  "fashion_mnist": IMAGE_SPLITS,
  "digits_public": IMAGE_SPLITS,
  "fashion_mnist_public": IMAGE_SPLITS,
  "cifar10": IMAGE_SPLITS,
  "tiny_imagenet": IMAGE_SPLITS,
  "imdb": ("amazon",),
  "mnli": ("snli",),
  "vader_minilm": ("amazon+tweets", "amazon", "tweets"),
  "vader_llm": ("amazon+tweets", "amazon", "tweets"),
}

# Blocks whose keys are fixed (their defaults' keys, or listed here).
FIXED_BLOCKS = ("mesh", "distributed", "privacy")
NESTED = {"hidden_state": ("report", "checkpoints_private")}


class UnknownFieldError(ValueError):
  """A config field that no part of the run reads."""


# Tasks registered without declaring their fields: which public data they
# provide is unknown, so check_public leaves them to the run.
UNDECLARED: set[str] = set()


def declare_task(name: str, fields, public_splits=()) -> None:
  """Records the fields (``None``: not declared) and public splits of a task
  registered outside :mod:`experiments.tasks` (called by its
  ``register``)."""
  TASK_FIELDS[name] = tuple(fields or ())
  if fields is None:
    UNDECLARED.add(name)
  if public_splits:
    PUBLIC_SPLITS[name] = tuple(public_splits)


@functools.cache
def default_schema() -> dict:
  """``configs/default.py``'s fields, a fixed block as its set of keys."""

  return {
    key: tuple(value.keys()) if key in FIXED_BLOCKS else None
    for key, value in default.get_config().items()
  }


def readers(name: str, estimators: dict) -> list[str]:
  """Which tasks and estimators read the field ``name`` (for the message):
  ``["the tasks 'a', 'b'", "the estimator 'c'"]``."""
  out = []
  for kind, table in (("task", TASK_FIELDS), ("estimator", estimators)):
    names = [repr(k) for k, fields in table.items() if name in fields]
    if names:
      out.append(f"the {kind}{'s' * (len(names) > 1)} {', '.join(names)}")
  return out


def _unknown_dataset(dataset) -> ValueError:
  close = difflib.get_close_matches(str(dataset), list(TASK_FIELDS), n=1)
  hint = f" (did you mean {close[0]!r}?)" if close else ""
  return ValueError(
    f"Unknown dataset {dataset!r}{hint}; choose one of "
    f"{', '.join(sorted(TASK_FIELDS))}."
  )


def run_fields(config, estimator_fields) -> set[str]:
  """Every top-level field the run of ``config`` reads."""
  dataset = config.get("dataset")
  if dataset not in TASK_FIELDS:
    raise _unknown_dataset(dataset)
  return (
    set(default_schema())
    | set(COMMON)
    | set(TASK_FIELDS[dataset])
    | set(estimator_fields)
  )


def _hint(name: str, known, config, estimators: dict) -> str:
  """``'name' (did you mean ...?)``, which tasks and estimators read it, or
  where a field of earlier releases moved."""
  moved = privacy_config.moved_hint(name)
  if moved:
    return moved
  others = readers(name, estimators) if "." not in name else []
  if others:  # a real field, of another task or estimator
    return (
      f"{name!r} (read by {' and '.join(others)}; this run has dataset "
      f"{config.get('dataset')!r} and estimator {config.get('estimator')!r})"
    )
  close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
  if close:
    return f"{name!r} (did you mean {close[0]!r}?)"
  return repr(name)


def unknown_fields(config, estimator_fields=()) -> list[tuple[str, list]]:
  """``[(field, the names it could have meant)]``: the fields (and keys of
  fixed blocks) of ``config`` that its run does not read."""
  known = run_fields(config, estimator_fields)
  schema = {**NESTED, **default_schema()}
  out = []
  for name in config.keys():
    if name not in known:
      out.append((name, known))
      continue
    keys, value = schema.get(name), config[name]
    if keys is not None and hasattr(value, "keys"):
      out += [
        (f"{name}.{k}", [f"{name}.{key}" for key in keys])
        for k in value.keys()
        if k not in keys
      ]
  return out


def check(config, estimator_fields=(), estimators=None) -> None:
  """Refuses the fields (and keys of fixed blocks) that the run of
  ``config`` does not read, in one message; ``estimator_fields``: its
  estimator's declared ``config_fields``; ``estimators``: every
  estimator's, named in the message."""
  unknown = unknown_fields(config, estimator_fields)
  if not unknown:
    return
  hints = [_hint(n, known, config, estimators or {}) for n, known in unknown]
  plural = "s" if len(hints) > 1 else ""
  raise UnknownFieldError(
    f"unknown config field{plural} {', '.join(hints)}: no part of this run "
    f"reads {'them' if plural else 'it'}, so as set "
    f"{'they' if plural else 'it'} would be ignored. Fix the name, or remove "
    f"the field{plural} (a task registered outside experiments.tasks "
    "declares its own fields: register(name, fields=...))."
  )


def check_public(config, estimator: str, public_data) -> None:
  """``config.public`` is one of the task's public splits, and is set when
  the estimator takes public data (``public_data``: its registry's
  ``public_data``, None for none)."""
  dataset = config.get("dataset")
  if dataset not in TASK_FIELDS or dataset in UNDECLARED:
    return  # an unknown task is refused by its build; an undeclared one
  public = config.get("public") or ""
  choices = PUBLIC_SPLITS.get(dataset, ())
  if public and public not in choices:
    listed = ", ".join(repr(c) for c in choices) or "none"
    raise ValueError(
      f"public={public!r} is not a public split of the task {dataset!r} "
      f"(its splits: {listed}); set config.public to one of them, or ''."
    )
  if public_data is None or public:
    return
  if choices:
    raise ValueError(
      f"{estimator} takes public data: set config.public to one of "
      f"{', '.join(repr(c) for c in choices)} (the public splits of the "
      f"task {dataset!r}), e.g. --config.public={choices[-1]}."
    )
  with_public = sorted(PUBLIC_SPLITS)
  raise ValueError(
    f"{estimator} takes public data, but the task {dataset!r} has no public "
    f"split; choose a dataset that has one ({', '.join(with_public)}) and "
    "set config.public, e.g. --config.dataset=digits "
    "--config.public=stratified4."
  )
