"""Which config fields a run reads; any other field is refused.

A run reads the fields of ``configs/default.py`` (the schema every config
is completed to: :mod:`experiments.run.config_defaults`), the fields its
task declares where it is registered
(``experiments.tasks.register(name, fields=...)``; the built-in tasks'
declarations are read from the tasks' JAX-free manifest,
:mod:`experiments.tasks.registry`) and the fields its estimator declares
(``config_fields`` of its registry entry, in the JAX-free manifest). A
field outside these, set in a config file or on the command
line, would be ignored without a word (``c.num_step = 100`` leaves
``num_steps`` at 4000), so :func:`check` refuses it, naming the closest
field the run reads (or where a field of earlier releases moved: the
privacy settings are in the ``privacy`` block). Inside the fixed blocks
(``mesh``, ``distributed``, ``privacy``, ``hidden_state``) the keys are
checked the same way; the free-form blocks
(``estimator_kwargs``, ``model_kwargs``, ...) are checked against what they
are passed to.

A task's declaration also names the public data it can provide
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
from experiments.tasks import registry as task_registry

# Fields every task reads (experiments.tasks.registry).
COMMON = task_registry.COMMON_FIELDS

# Blocks whose keys are fixed (their defaults' keys, or listed here).
FIXED_BLOCKS = ("mesh", "distributed", "privacy")
NESTED = {"hidden_state": ("report", "checkpoints_private")}


class UnknownFieldError(ValueError):
  """A config field that no part of the run reads."""


def declare_task(name: str, fields, public_splits=()) -> None:
  """Records the fields (``None``: not declared) and public splits of a task
  (``experiments.tasks.register`` does, for the tasks it registers)."""
  task_registry.declare(name, fields, public_splits)


def task_fields() -> dict[str, tuple[str, ...]]:
  """``{task: the fields it declares}`` (``()`` for an undeclared one)."""
  return {n: d.fields or () for n, d in task_registry.declarations().items()}


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
  for kind, table in (("task", task_fields()), ("estimator", estimators)):
    names = [repr(k) for k, fields in table.items() if name in fields]
    if names:
      out.append(f"the {kind}{'s' * (len(names) > 1)} {', '.join(names)}")
  return out


def _unknown_dataset(dataset) -> ValueError:
  known = task_fields()
  close = difflib.get_close_matches(str(dataset), list(known), n=1)
  hint = f" (did you mean {close[0]!r}?)" if close else ""
  return ValueError(
    f"Unknown dataset {dataset!r}{hint}; choose one of "
    f"{', '.join(sorted(known))}."
  )


def run_fields(config, estimator_fields) -> set[str]:
  """Every top-level field the run of ``config`` reads."""
  declaration = task_registry.declaration(config.get("dataset"))
  if declaration is None:
    raise _unknown_dataset(config.get("dataset"))
  return (
    set(default_schema())
    | set(COMMON)
    | set(declaration.fields or ())
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
  declaration = task_registry.declaration(dataset)
  if declaration is None or declaration.fields is None:
    return  # an unknown task is refused by its build; an undeclared one
  public = config.get("public") or ""
  choices = declaration.public_splits
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
  declared = task_registry.declarations().values()
  with_public = sorted(d.name for d in declared if d.public_splits)
  raise ValueError(
    f"{estimator} takes public data, but the task {dataset!r} has no public "
    f"split; choose a dataset that has one ({', '.join(with_public)}) and "
    "set config.public, e.g. --config.dataset=digits "
    "--config.public=stratified4."
  )
