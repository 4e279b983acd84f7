"""Writes (or checks) ``manifest.json``: the registry's declarations that a
command line reads before JAX loads (see
:mod:`zoprivacy.estimator_manifest`).

  python -m zoprivacy.estimators.manifest --write   # after changing a spec
  python -m zoprivacy.estimators.manifest           # exit 1 if stale
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import sys
import warnings
from typing import Any

import optax

import zoprivacy.estimators  # noqa: F401  (registers every estimator)
from zoprivacy import estimator_manifest
from zoprivacy.estimators import registry

PACKAGE = "zoprivacy.estimators."


def jsonable(value: Any) -> Any:
  if isinstance(value, (tuple, list)):
    return [jsonable(v) for v in value]
  if value is None or isinstance(value, (bool, int, float, str)):
    return value
  raise TypeError(f"a registered default {value!r} is not JSON-representable")


def _declaration(spec: registry.EstimatorSpec) -> dict[str, Any]:
  return {
    "name": spec.name,
    "private": spec.private,
    "takes_setting": spec.takes_setting,
    "sampling": list(spec.sampling),
    "parameters": list(inspect.signature(spec.factory).parameters),
    "defaults": [[k, jsonable(v)] for k, v in spec.defaults],
    "required": list(spec.required),
    "public_data": spec.public_data,
    "learning_rate": spec.learning_rate,
    "config_fields": list(spec.config_fields),
    "run_settings": [[k, jsonable(v)] for k, v in spec.run_settings],
  }


def _optax_names() -> dict[str, Any]:
  """What ``experiments.run.optimizers.make_optimizer`` accepts: a callable optax
  attribute not named ``*_schedule``, deprecated aliases included."""
  names = dir(optax)
  deprecated = [
    name
    for cell in optax.__getattr__.__closure__ or ()
    if isinstance(cell.cell_contents, dict)
    for name in cell.cell_contents
  ]
  accepted = []
  for name in sorted(set(names) | set(deprecated)):
    try:
      with warnings.catch_warnings():  # a deprecated alias warns
        warnings.simplefilter("ignore")
        value = getattr(optax, name, None)
    except Exception:  # pylint: disable=broad-except
      value = None  # a removed alias raises its own message
    if callable(value) and not name.endswith("_schedule"):
      accepted.append(name)
  return {
    "version": importlib.metadata.version("optax"),
    "names": names,
    "optimizers": accepted,
  }


def build() -> dict[str, Any]:
  """The manifest of the estimators this package registers (an estimator
  registered from elsewhere is not in it: the runner then reads the live
  registry)."""
  shipped = [
    spec
    for spec in (registry.get(n) for n in registry.names())
    if spec.factory.__module__.startswith(PACKAGE)
  ]
  return {
    "estimators": [_declaration(s) for s in shipped],
    "optax": _optax_names(),
  }


def dumps(manifest: dict[str, Any]) -> str:
  return json.dumps(manifest, indent=1) + "\n"


def main(argv: list[str]) -> int:
  text = dumps(build())
  if "--write" in argv:
    with open(estimator_manifest.PATH, "w", encoding="utf-8") as f:
      f.write(text)
    return 0
  with open(estimator_manifest.PATH, encoding="utf-8") as f:
    if f.read() == text:
      return 0
  print(
    f"{estimator_manifest.PATH} is stale; run "
    "python -m zoprivacy.estimators.manifest --write",
    file=sys.stderr,
  )
  return 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
