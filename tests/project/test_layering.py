"""The import graph of ``zoprivacy`` follows its layering (README, "Layout").

Every top-level module and subpackage of ``zoprivacy`` is assigned to one
layer; a module may import only from its own layer or a lower one, and no
two subpackages import each other, directly or through others. Read from
the source with ``ast`` (imports inside functions count too).
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2] / "zoprivacy"

# Lowest first. A unit is a subpackage or a top-level module of zoprivacy.
LAYERS = (
  ("foundation", ("core",)),
  ("accounting", ("accounting",)),
  ("primitives", ("mechanisms", "zo", "first_order")),
  ("privacy", ("privacy",)),
  ("secret noise", ("secret_noise",)),
  ("data", ("data",)),
  ("models", ("models",)),
  ("evaluation", ("metrics",)),
  ("algorithms", ("estimators", "training", "hidden_state", "audit")),
)  # fmt: skip
LAYER = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}


def _unit(module: str):
  parts = module.split(".")
  return parts[1] if len(parts) > 1 and parts[0] == "zoprivacy" else None


def _imports(path: pathlib.Path):
  """The zoprivacy modules ``path`` imports (absolute imports)."""
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      yield from (a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      yield node.module
      if node.module == "zoprivacy":
        yield from (f"zoprivacy.{a.name}" for a in node.names)


def _edges():
  for path in sorted(ROOT.rglob("*.py")):
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    src = _unit(".".join(p for p in parts if p != "__init__"))
    if src is None or path.stem == "__main__":
      continue  # the zoprivacy facade and the command lines are on top
    for name in _imports(path):
      dst = _unit(name)
      if dst is not None and dst != src:
        yield str(path.relative_to(ROOT.parent)), src, dst


def test_every_unit_is_assigned_a_layer():
  units = {p.stem for p in ROOT.glob("*.py") if p.stem != "__init__"}
  units |= {p.parent.name for p in ROOT.glob("*/__init__.py")}
  assert units == set(LAYER), units ^ set(LAYER)


def test_no_module_imports_from_a_higher_layer():
  upward = [
    f"{path}: {src} ({LAYERS[LAYER[src]][0]}) imports {dst} "
    f"({LAYERS[LAYER[dst]][0]})"
    for path, src, dst in _edges()
    if LAYER[dst] > LAYER[src]
  ]
  assert not upward, "\n".join(upward)


def test_no_cycle_between_subpackages():
  graph = {}
  for _, src, dst in _edges():
    graph.setdefault(src, set()).add(dst)

  def reach(start):
    seen, todo = set(), [start]
    while todo:
      for nxt in graph.get(todo.pop(), ()):
        if nxt not in seen:
          seen.add(nxt)
          todo.append(nxt)
    return seen

  packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
  cycles = [p for p in sorted(packages) if p in reach(p)]
  assert not cycles, cycles


@pytest.mark.parametrize(
  "source",
  [
    "from zoprivacy.estimators import base\n",
    "import zoprivacy.training.layerwise\n",
  ],
)
def test_the_check_sees_an_upward_import(tmp_path, source):
  path = tmp_path / "m.py"
  path.write_text(source)
  (name,) = list(_imports(path))
  assert LAYER[_unit(name)] > LAYER["models"]
