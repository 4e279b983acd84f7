"""The import graph of ``zoprivacy`` follows its layering (README, "Layout").

Every top-level module and subpackage of ``zoprivacy`` is assigned to one
layer; a module may import only from its own layer or a lower one (command
lines included), and no two subpackages import each other, directly or
through others; no two modules import each other either. An import inside a
function says why in a comment (an optional dependency, or JAX kept out of
a start-up path), and none hides a circle. Read from the source with
``ast`` (imports inside functions count too).
"""

import ast
import pathlib

import import_graph
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
  ("algorithms", ("estimators", "estimator_manifest", "training", "hidden_state", "audit")),
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
    if src is None:
      continue  # the zoprivacy facade is on top
    for name in _imports(path):
      dst = _unit(name)
      if dst is not None and dst != src:
        yield str(path.relative_to(ROOT.parent)), src, dst


def test_every_unit_is_assigned_a_layer():
  units = import_graph.units(ROOT)
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


def _reads_up(path: pathlib.Path, source: str):
  """The higher layers' folders whose files ``path`` builds a path to."""
  src = _unit(".".join(path.relative_to(ROOT.parent).with_suffix("").parts))
  if src is None:
    return []
  pieces = import_graph.path_pieces(source)
  return sorted(p for p in pieces if p in LAYER and LAYER[p] > LAYER[src])


def test_no_module_reads_a_file_of_a_higher_layer():
  """Data is read where it belongs: a module builds no path into a higher
  layer's folder (a JAX-free copy of the estimators' knowledge in ``core``,
  read from ``estimators/manifest.json``, would be one)."""
  found = [
    f"{path.relative_to(ROOT.parent)} reads {dst}/"
    for path in sorted(ROOT.rglob("*.py"))
    for dst in _reads_up(path, path.read_text())
  ]
  assert not found, "\n".join(found)


def test_the_file_check_sees_a_path_into_a_higher_layer():
  source = (
    "import os\n"
    "PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)),\n"
    "                    'estimators', 'manifest.json')\n"
  )
  assert _reads_up(ROOT / "core" / "m.py", source) == ["estimators"]
  assert _reads_up(ROOT / "estimator_manifest.py", source) == []


# ----------------------------------------------------- modules, inner imports

# What the comments of a function may give as the reason for an import
# inside it.
REASONS = ("JAX", "optional dependency", "runpy")


MODULES = import_graph.modules(ROOT)
_comment = import_graph.comment
_reaches = import_graph.reaches


def _targets(node) -> list[str]:
  return import_graph.targets(node, MODULES)


def test_no_two_modules_import_each_other():
  circles = import_graph.circles(import_graph.whole_graph(MODULES))
  assert not circles, circles


def test_every_import_inside_a_function_says_why():
  silent = import_graph.silent(MODULES, REASONS)
  assert not silent, "\n".join(silent)


def test_no_import_inside_a_function_hides_a_circle():
  hidden = import_graph.hidden_circles(MODULES)
  assert not hidden, "\n".join(hidden)


@pytest.mark.parametrize(
  "comment,says_why",
  [("", False), ("  # Imported here: keeps JAX out of the CLI.\n", True)],
)
def test_the_module_checks_see_a_silent_import_and_a_circle(comment, says_why):
  source = f"def f():\n  x = 1\n{comment}  from zoprivacy.core import lazy\n"
  tree = ast.parse(source)
  (node,) = [n for n in ast.walk(tree) if _targets(n)]
  text = _comment(source.splitlines(), node, tree.body[0])
  assert any(r in text for r in REASONS) == says_why
  graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
  assert _reaches(graph, "a", "a") and not _reaches(graph, "c", "d")


def _lazy_exports(path: pathlib.Path):
  """``(name, module)`` of the string table a package's ``__getattr__``
  imports from (``{"name": "zoprivacy.x.y"}``)."""
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Dict):
      for key, value in zip(node.keys, node.values):
        if (
          isinstance(key, ast.Constant)
          and isinstance(value, ast.Constant)
          and isinstance(value.value, str)
          and value.value.startswith("zoprivacy.")
        ):
          yield key.value, value.value


def test_lazy_exports_point_down():
  """No package hands on a name from a higher layer, even lazily."""
  upward = [
    f"{path.parent.name}.{name} -> {module}"
    for path in sorted(ROOT.glob("*/__init__.py"))
    for name, module in _lazy_exports(path)
    if _unit(module) is not None
    and LAYER[_unit(module)] > LAYER[path.parent.name]
  ]
  assert not upward, upward


def test_the_lazy_export_check_sees_an_upward_name(tmp_path):
  path = tmp_path / "__init__.py"
  path.write_text('_EXPORTS = {"PrivacyLedger": "zoprivacy.privacy.ledger"}\n')
  ((name, module),) = list(_lazy_exports(path))
  assert name == "PrivacyLedger"
  assert LAYER[_unit(module)] > LAYER["accounting"]
