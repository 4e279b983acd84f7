"""The import graph of a package, read from its source with ``ast``: the
modules each module imports at load time, and the imports inside functions
with the comments that say why (shared by the layering tests)."""

import ast
import pathlib


def modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
  """``{dotted module name: path}`` of every module under ``root``."""

  def name(path):
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

  return {name(p): p for p in root.rglob("*.py")}


def targets(node, known) -> list[str]:
  """The modules of ``known`` an import statement reads: ``from package
  import submodule`` reads the submodule, ``from module import name`` the
  module (a package's ``__init__`` that runs on the way is not counted)."""
  if isinstance(node, ast.Import):
    names = [a.name for a in node.names]
  elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
    names = [
      f"{node.module}.{a.name}"
      if f"{node.module}.{a.name}" in known
      else node.module
      for a in node.names
    ]
  else:
    names = []
  return [n for n in names if n in known]


def comment(lines, node, function) -> str:
  """The comments of the function holding an import, up to the import's
  line (its trailing comment included)."""
  return " ".join(
    line.partition("#")[2] for line in lines[function.lineno - 1 : node.lineno]
  )


def module_imports(known):
  """``({module: modules it imports at load time}, [(module, line,
  target, comment)] for each import inside a function)``."""
  top, inner = {}, []
  for name, path in known.items():
    text = path.read_text()
    lines, tree = text.splitlines(), ast.parse(text)
    function_of = {
      id(n): f
      for f in ast.walk(tree)
      if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
      for n in ast.walk(f)
    }
    top[name] = set()
    for node in ast.walk(tree):
      for target in targets(node, known):
        function = function_of.get(id(node))
        if function is None:
          top[name].add(target)
        else:
          inner.append(
            (name, node.lineno, target, comment(lines, node, function))
          )
  return top, inner


def reaches(graph, start, goal) -> bool:
  """Whether ``goal`` is reachable from ``start`` along ``graph``'s arrows."""
  seen, todo = set(), [start]
  while todo:
    for nxt in graph.get(todo.pop(), ()):
      if nxt == goal:
        return True
      if nxt not in seen:
        seen.add(nxt)
        todo.append(nxt)
  return False


def whole_graph(known):
  """Every module's imports, at load time or inside a function."""
  top, inner = module_imports(known)
  graph = {m: set(t) for m, t in top.items()}
  for src, _, dst, _ in inner:
    graph[src].add(dst)
  return graph


def circles(graph) -> list[str]:
  """The modules from which an arrow path leads back to themselves."""
  return sorted(m for m in graph if reaches(graph, m, m))


def silent(known, reasons) -> list[str]:
  """``path:line imports module`` for each import inside a function whose
  comments give none of ``reasons``."""
  _, inner = module_imports(known)
  return [
    f"{known[src]}:{line} imports {dst}"
    for src, line, dst, text in inner
    if not any(reason in text for reason in reasons)
  ]


def hidden_circles(known) -> list[str]:
  """Inner imports that, loaded at the top, would close a circle (a package
  reading its own submodule on first use aside)."""
  top, inner = module_imports(known)
  return [
    f"{known[src]}:{line} imports {dst}, which imports it back"
    for src, line, dst, _ in inner
    if not dst.startswith(src + ".") and reaches(top, dst, src)
  ]


def units(root: pathlib.Path) -> set[str]:
  """The top-level modules and subpackages of the package at ``root``."""
  found = {p.stem for p in root.glob("*.py") if p.stem != "__init__"}
  return found | {p.parent.name for p in root.glob("*/__init__.py")}


PATH_CALLS = ("join", "Path", "joinpath", "open", "files")


def path_pieces(source: str) -> set[str]:
  """The folder and file names in the string constants that ``source``
  builds paths from: arguments of ``os.path.join``, ``Path``, ``joinpath``,
  ``open`` and ``importlib.resources.files``, and operands of ``/``."""
  pieces = set()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Call):
      func = node.func
      name = func.attr if isinstance(func, ast.Attribute) else ""
      name = name or getattr(func, "id", "")
      operands = node.args if name in PATH_CALLS else []
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
      operands = [node.left, node.right]
    else:
      operands = []
    for operand in operands:
      if isinstance(operand, ast.Constant) and isinstance(operand.value, str):
        pieces.update(operand.value.replace("\\", "/").split("/"))
  return pieces
