"""The task registry: each task's builder and what it declares, beside it.

``config.dataset`` names a task registered here with :func:`register`,
above its builder: ``@register("cifar10", fields=..., public_splits=...)``.
A registration declares the config fields the builder reads beyond the
default schema and :data:`COMMON_FIELDS` (a runner refuses any other:
:mod:`experiments.run.config_fields`) and the values of ``config.public``
it accepts (an estimator that needs public data is refused, before
anything loads, when none is set). The modules of :mod:`experiments.tasks`
register theirs when :mod:`experiments.tasks.builtin` imports them.

A command line checks a config before it imports any task (they load JAX),
so the built-in tasks' declarations are also written, from their
registrations, to ``manifest.json`` beside this module
(``python -m experiments.tasks.manifest --write``; a test fails when it is
stale); :func:`declarations` reads it, and the live registrations of this
process win. This module imports nothing of experiments and no JAX.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import os
from collections.abc import Callable
from typing import Any

# Fields every task reads: the public split and the public proxy
# (experiments.tasks.builtin.get_task, public_proxy.py) and the data seed.
COMMON_FIELDS = ("public", "data_seed", "validation_size", "examples_per_class")
MANIFEST = os.path.join(os.path.dirname(__file__), "manifest.json")
PACKAGE = "experiments.tasks."  # the built-in tasks' modules


@dataclasses.dataclass(frozen=True)
class Declaration:
  """What a task reads: ``fields`` beyond the default schema and
  :data:`COMMON_FIELDS` (``None``: registered without declaring them, so
  its public data is unknown and only the run checks it);
  ``public_splits``: the values of ``config.public`` it accepts ('' is
  always no public data)."""

  name: str
  fields: tuple[str, ...] | None = None
  public_splits: tuple[str, ...] = ()


TaskBuilder = Callable[[Any], Any]  # config -> experiments.tasks.task.Task
TASKS: dict[str, TaskBuilder] = {}
_DECLARED: dict[str, Declaration] = {}


def register(name: str, *, fields=None, public_splits=()):
  """Decorator: ``@register('cifar10', fields=(...), public_splits=(...))``
  makes ``config.dataset='cifar10'`` work and declares what it reads."""

  def wrap(builder: TaskBuilder) -> TaskBuilder:
    if name in TASKS or (not built_in(builder) and name in shipped()):
      # A built-in name taken before the built-in tasks load is refused
      # here, not when they load.
      raise ValueError(f"Task {name!r} is registered twice.")
    TASKS[name] = builder
    declare(name, fields, public_splits)
    return builder

  return wrap


def built_in(builder: TaskBuilder) -> bool:
  """Whether a builder (or the function a ``functools.partial`` wraps) is
  defined in this package."""
  module = getattr(getattr(builder, "func", builder), "__module__", "")
  return (module or "").startswith(PACKAGE)


def declare(name: str, fields, public_splits=()) -> None:
  """Records what the task ``name`` reads (:class:`Declaration`)."""
  _DECLARED[name] = Declaration(
    name,
    None if fields is None else tuple(fields),
    tuple(public_splits),
  )


def build_task(config):
  """Builds the registered task named by ``config.dataset`` (its private
  data; :func:`experiments.tasks.get_task` adds the public proxy)."""
  if config.dataset not in TASKS:
    close = difflib.get_close_matches(str(config.dataset), list(TASKS), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(
      f"Unknown dataset {config.dataset!r}{hint}; choose one of "
      f"{sorted(TASKS)}."
    )
  try:
    return TASKS[config.dataset](config)
  except AttributeError as e:
    if "FrozenConfigDict is immutable" not in str(e):
      raise
    raise ValueError(
      f"The builder of the task {config.dataset!r} writes to its config, "
      "which the runner hands it read-only (the run's settings were read "
      "from it once and must not change under it): copy it first, "
      "config = ml_collections.ConfigDict(config), or set the value in the "
      f"config file or on the command line ({e})."
    ) from e


@functools.cache
def shipped() -> dict[str, Declaration]:
  """The built-in tasks' declarations, as ``manifest.json`` has them."""
  with open(MANIFEST, encoding="utf-8") as f:
    entries = json.load(f)["tasks"]
  return {
    e["name"]: Declaration(
      e["name"],
      None if e["fields"] is None else tuple(e["fields"]),
      tuple(e["public_splits"]),
    )
    for e in entries
  }


def registered() -> dict[str, Declaration]:
  """The declarations of the tasks registered in this process."""
  return dict(_DECLARED)


def declarations() -> dict[str, Declaration]:
  """Every known task's declaration: the built-in ones (without importing
  them) and those registered in this process."""
  return {**shipped(), **_DECLARED}


def declaration(name) -> Declaration | None:
  """The declaration of the task ``name``; ``None`` for an unknown task."""
  return declarations().get(name)
