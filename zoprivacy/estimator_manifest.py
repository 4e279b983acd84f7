"""The estimators' registry declarations, read without importing JAX.

``zoprivacy/estimators/manifest.json`` holds, per registered estimator, what
a command line checks before the numerical libraries load (its name, whether
it is private, the keyword names its factory takes, its registered defaults,
the sampling schemes its accounting covers), and the optax names a runner
accepts as an optimizer. ``python -m zoprivacy.estimators.manifest --write``
regenerates it from the live registry; a test fails when it is stale.

This reader sits beside the estimators' package, at its layer, not in it:
importing ``zoprivacy.estimators`` registers every estimator and loads JAX,
which a command line's first checks must not wait for. The registry uses
:func:`unknown_estimator`, so that a typo reads the same before and after.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.metadata
import json
import os
from typing import Any

PATH = os.path.join(os.path.dirname(__file__), "estimators", "manifest.json")


@dataclasses.dataclass(frozen=True)
class Declaration:
  """The JAX-free part of an :class:`~zoprivacy.estimators.registry.EstimatorSpec`.

  ``parameters``: the factory's keyword names, in signature order;
  ``public_data``, ``learning_rate``, ``config_fields``, ``run_settings``
  and ``required`` (hyperparameters without a default) as registered.
  """

  name: str
  private: bool
  takes_setting: bool
  sampling: tuple[str, ...]
  parameters: tuple[str, ...]
  defaults: tuple[tuple[str, Any], ...]
  public_data: str | None = None
  learning_rate: float | None = None
  config_fields: tuple[str, ...] = ()
  run_settings: tuple[tuple[str, Any], ...] = ()
  required: tuple[str, ...] = ()


@functools.cache
def load() -> dict[str, Any]:
  """The manifest as written by the generator."""
  with open(PATH, encoding="utf-8") as f:
    return json.load(f)


def declarations() -> dict[str, Declaration]:
  """Every registered estimator's declaration, in registration order."""
  out = {}
  for entry in load()["estimators"]:
    out[entry["name"]] = Declaration(
      name=entry["name"],
      private=entry["private"],
      takes_setting=entry["takes_setting"],
      sampling=tuple(entry["sampling"]),
      parameters=tuple(entry["parameters"]),
      defaults=tuple((k, v) for k, v in entry["defaults"]),
      public_data=entry.get("public_data"),
      learning_rate=entry.get("learning_rate"),
      config_fields=tuple(entry.get("config_fields", ())),
      run_settings=tuple((k, v) for k, v in entry.get("run_settings", ())),
      required=tuple(entry.get("required", ())),
    )
  return out


def get(name: str) -> Declaration:
  """The declaration of ``name``; a typo raises the registry's own error."""
  known = declarations()
  try:
    return known[name]
  except KeyError:
    raise unknown_estimator(name, known) from None


def unknown_estimator(name, known) -> KeyError:
  """The error for an estimator name not in ``known`` (the live registry
  raises the same one), with the closest registered name."""
  close = difflib.get_close_matches(str(name), known, n=1)
  hint = f" Did you mean {close[0]!r}?" if close else ""
  return KeyError(
    f"Unknown estimator {name!r}.{hint} Registered: {', '.join(sorted(known))}."
  )


def optax_names() -> tuple[tuple[str, ...], tuple[str, ...]] | None:
  """``(every name of optax, the names a runner accepts as an optimizer)``,
  or ``None`` when the installed optax is not the one the manifest was
  written from (then only the live check decides)."""
  entry = load()["optax"]
  try:
    installed = importlib.metadata.version("optax")
  except importlib.metadata.PackageNotFoundError:
    return None
  if installed != entry["version"]:
    return None
  return tuple(entry["names"]), tuple(entry["optimizers"])
