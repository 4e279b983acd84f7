"""Every function in experiments/ is at most 60 lines (the style rule).

Counted as the ``def`` statement's span in the source (decorators excluded,
docstring and body included), for every function and method, nested ones
too. A function that grows past the limit is split into named helpers.
"""

import ast
import pathlib

MAX_LINES = 60
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _long_functions(directory: pathlib.Path) -> list[str]:
  """``path:line name (n lines)`` for each function over the limit."""
  found = []
  for path in sorted(directory.rglob("*.py")):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        lines = node.end_lineno - node.lineno + 1
        if lines > MAX_LINES:
          where = path.relative_to(directory)
          found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
  return found


def test_every_function_in_experiments_is_at_most_60_lines():
  assert not _long_functions(ROOT / "experiments")


def test_the_check_finds_a_long_nested_function(tmp_path):
  body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
  (tmp_path / "long.py").write_text(f"def outer():\n  def inner():\n{body}\n")
  (tmp_path / "short.py").write_text("def g():\n  return 1\n")
  names = [s.split(" ")[1] for s in _long_functions(tmp_path)]
  assert names == ["outer", "inner"]
