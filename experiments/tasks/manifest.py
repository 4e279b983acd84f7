"""Writes (or checks) ``manifest.json``: the built-in tasks' declarations
(the config fields and public splits each registers beside its builder),
which :mod:`experiments.tasks.registry` reads before any task, and JAX,
loads.

  python -m experiments.tasks.manifest --write   # after changing a task
  python -m experiments.tasks.manifest           # exit 1 if stale
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

from experiments.tasks import builtin, registry

COMMAND = "python -m experiments.tasks.manifest"


def build() -> dict[str, Any]:
  """The declarations of the tasks this package registers (a task
  registered from elsewhere is declared when its module is imported)."""
  declared = registry.registered()  # not the manifest being written
  entries = []
  for name, builder in sorted(builtin.TASKS.items()):  # any import order
    if registry.built_in(builder):
      d = declared[name]
      entries.append(
        {
          "name": name,
          "fields": None if d.fields is None else list(d.fields),
          "public_splits": list(d.public_splits),
        }
      )
  return {"tasks": entries}


def dumps(manifest: dict[str, Any]) -> str:
  """One task a line (a changed declaration is a one-line diff)."""
  lines = ",\n".join(f"  {json.dumps(e)}" for e in manifest["tasks"])
  return f'{{"tasks": [\n{lines}\n]}}\n'


def main(argv: list[str]) -> int:
  text, path = dumps(build()), pathlib.Path(registry.MANIFEST)
  if "--write" in argv:
    path.write_text(text, encoding="utf-8")
  elif path.read_text(encoding="utf-8") != text:
    print(f"{path} is stale; run {COMMAND} --write", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
