"""Re-executes notebooks in place at their CI settings (the committed outputs).

    python notebooks/refresh.py                 # all of them
    python notebooks/refresh.py quickstart      # one

The committed outputs are what ``tests/project/test_notebooks.py`` compares a
fresh execution with; refresh them whenever the code they show changes.
"""

from __future__ import annotations

import pathlib
import sys

import nbclient
import nbformat

HERE = pathlib.Path(__file__).parent


def execute(path: pathlib.Path, timeout: int = 600) -> nbformat.NotebookNode:
  """Runs ``path`` top to bottom in a fresh kernel; returns the notebook."""
  nb = nbformat.read(path, as_version=4)
  client = nbclient.NotebookClient(
    nb,
    timeout=timeout,
    kernel_name="python3",
    resources={"metadata": {"path": str(path.parent.parent)}},
  )
  client.execute()
  return nb


def main(names: list[str]) -> None:
  paths = [HERE / f"{n}.ipynb" for n in names] or sorted(HERE.glob("*.ipynb"))
  for path in paths:
    nb = execute(path)
    nbformat.write(nb, path)
    print("refreshed", path.name)


if __name__ == "__main__":
  main(sys.argv[1:])
