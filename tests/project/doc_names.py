"""The names the docs give in prose, resolved statically against the tree.

Three kinds of name are found in README.md, REPRODUCTION.md and docs/*.md
(fenced blocks included):

* paths under the project's folders (``configs/x.py``,
  ``experiments/run/loop.py``, ``tests/x.py::test_y``, ``docs/x.md``):
  the file exists (and the test function is defined in it);
* dotted names under the project's packages (``zoprivacy.privacy.
  PrivacyPlan``, ``experiments.run``, ``configs.default``): the longest
  prefix that is a module file exists, and the rest is defined in it
  (top-level ``def``, ``class``, assignment or import, followed through
  imports and the lazy exports of a module with ``__getattr__``; then a
  class's methods, fields and ``self.`` attributes);
* inline code that is one identifier and looks like a project symbol: a
  compound CamelCase name (``PrivacyPlan``), a snake_case call
  (``find_plan(...)``) or ``Class.attr`` of a project class: the name is
  used somewhere in the project's code (or is one of :data:`EXTERNAL`).

Nothing is imported but ``zoprivacy``'s own ``__init__`` (lazy: no JAX),
for the table of its lazy exports.
"""

from __future__ import annotations

import ast
import functools
import glob
import os
import re

ROOTS = ("zoprivacy", "experiments", "configs", "benchmarks", "tests")
FOLDERS = (*ROOTS, "notebooks", "docs", ".ci")
DOCS = ("README.md", "REPRODUCTION.md", *sorted(glob.glob("docs/*.md")))
# Names of other projects that the docs cite in inline code.
EXTERNAL = frozenset(
  {
    "RobertaForMaskedLM",  # Hugging Face's class of a RoBERTa checkpoint
    "CopaTemplate",  # MeZO's templates (its tasks.py), as the docs cite them
    "MultiRCTemplate",
    "ReCoRDTemplateGPT3",
    "convert_f32",  # an XLA HLO instruction's name
  }
)
# Names the docs give that are not in the tree, on purpose.
ABSENT = {
  "configs/nope.py": "docs/experiments.md's error table: a missing config",
  "docs/_build/html": "what the docs' build command writes",
}
FILE_SUFFIXES = frozenset(
  {"md", "py", "ipynb", "json", "jsonl", "png", "csv", "txt", "toml", "cfg"}
)

_FOLDERS = "|".join(re.escape(f) for f in FOLDERS)
PATH = re.compile(
  rf"(?<![\w/.<>-])((?:{_FOLDERS})/[\w./-]*\w)(::\w+)?(?![\w*<{{])"
)
DOTTED = re.compile(rf"(?<![\w/.-])((?:{'|'.join(ROOTS)})(?:\.[A-Za-z_]\w*)+)")
INLINE = re.compile(r"(?<!`)`([A-Za-z_]\w*)(\.[A-Za-z_]\w*)?(\([^`]*\))?`")
CAMEL = re.compile(r"^[A-Z][a-z0-9]+[A-Z]\w*$")
SNAKE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")


def module_file(dotted: str) -> str | None:
  base = dotted.replace(".", "/")
  for path in (base + ".py", base + "/__init__.py"):
    if os.path.isfile(path):
      return path
  return base if os.path.isdir(base) else None


@functools.cache
def _tree(path: str) -> ast.Module:
  with open(path) as f:
    return ast.parse(f.read())


def _top_level(body):
  for node in body:
    yield node
    if isinstance(node, (ast.If, ast.Try, ast.With)):
      for block in ("body", "orelse", "finalbody"):
        yield from _top_level(getattr(node, block, []))
      for handler in getattr(node, "handlers", []):
        yield from _top_level(handler.body)


@functools.cache
def module_names(path: str) -> dict:
  """``name -> ('class', node) | ('import', dotted) | ('value', None)``."""
  out = {}
  for node in _top_level(_tree(path).body):
    if isinstance(node, ast.ClassDef):
      out[node.name] = ("class", node)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      out[node.name] = ("value", None)
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
      targets = node.targets if isinstance(node, ast.Assign) else [node.target]
      for t in targets:
        for name in ast.walk(t):
          if isinstance(name, ast.Name):
            out[name.id] = ("value", None)
    elif isinstance(node, ast.ImportFrom) and node.level == 0:
      for a in node.names:
        out[a.asname or a.name] = ("import", f"{node.module}.{a.name}")
    elif isinstance(node, ast.Import):
      for a in node.names:
        out[a.asname or a.name.split(".")[0]] = (
          "import",
          a.name if a.asname else a.name.split(".")[0],
        )
  return out


@functools.cache
def _lazy_targets(path: str) -> dict[str, tuple[str, ...]]:
  """A lazy module's exports: ``name -> dotted names it may stand for``."""
  out = {}
  if path == "zoprivacy/__init__.py":
    import zoprivacy  # pylint: disable=g-import-not-at-top  # lazy, no JAX

    # pylint: disable=protected-access
    out.update({k: (v,) for k, v in zoprivacy._MODULES.items()})
    out.update({k: (f"{v}.{k}",) for k, v in zoprivacy._EXPORTS.items()})
  for node in ast.walk(_tree(path)):
    if isinstance(node, ast.Dict):
      for k, v in zip(node.keys, node.values):
        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant):
          if isinstance(k.value, str) and isinstance(v.value, str):
            out.setdefault(k.value, (f"{v.value}.{k.value}", v.value))
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
      out.setdefault(node.value, ())
  return out


def _is_lazy(path: str) -> bool:
  return "__getattr__" in module_names(path)


def _class_attrs(node: ast.ClassDef) -> set[str]:
  out = set()
  for child in ast.walk(node):
    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      out.add(child.name)
    elif isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
      out.add(child.id)
    elif isinstance(child, ast.Attribute) and isinstance(child.ctx, ast.Store):
      out.add(child.attr)  # self.x = ...
  return out


def _in_class(path: str, node: ast.ClassDef, attr: str) -> str | None:
  if attr in _class_attrs(node):
    return None
  names = module_names(path)
  for base in node.bases:
    if isinstance(base, ast.Name) and names.get(base.id, ("",))[0] == "class":
      if _in_class(path, names[base.id][1], attr) is None:
        return None
    elif isinstance(base, ast.Name) and base.id in names:
      kind, target = names[base.id]
      if kind == "import" and resolve(f"{target}.{attr}") is None:
        return None
      if kind == "import" and target.split(".")[0] not in ROOTS:
        return None  # an external base: its attributes are not checked
    elif not isinstance(base, ast.Name) or base.id != "object":
      return None  # NamedTuple, Enum, Generic[...]: not checked further
  return f"class {node.name} ({path}) has no {attr!r}"


def _resolve_in(path: str, rest: list[str]) -> str | None:
  if not rest:
    return None
  name, more = rest[0], rest[1:]
  if os.path.isdir(path):
    return f"{path}/ has no module {name!r}"
  names = module_names(path)
  if name in names:
    kind, target = names[name]
    if kind == "import":
      if target.split(".")[0] not in ROOTS:
        return None  # an external name: not checked
      return resolve(".".join([target, *more]))
    if kind == "class" and more:
      return _in_class(path, target, more[0])
    return None
  if _is_lazy(path) and name in _lazy_targets(path):
    targets = _lazy_targets(path)[name]
    if not targets or any(
      resolve(".".join([t, *more])) is None for t in targets
    ):
      return None
  return f"{path} defines no {name!r}"


def resolve(dotted: str) -> str | None:
  """None when ``dotted`` names something in the tree, else why not."""
  parts = dotted.split(".")
  for i in range(len(parts), 0, -1):
    path = module_file(".".join(parts[:i]))
    if path is not None:
      return _resolve_in(path, parts[i:])
  return f"no module {parts[0]!r}"


def check_path(path: str, test: str | None) -> str | None:
  if path in ABSENT:
    return None
  if not os.path.exists(path):
    return f"no file {path}"
  if test and test[2:] not in module_names(path):
    return f"{path} has no {test[2:]!r}"
  return None


@functools.cache
def _sources() -> dict[str, str]:
  out = {}
  for root in ROOTS:
    for path in glob.glob(f"{root}/**/*.py", recursive=True):
      with open(path) as f:
        out[path] = f.read()
  return out


@functools.cache
def project_identifiers() -> frozenset[str]:
  """Every identifier in the project's source (a regex scan: parsing
  every file would take seconds), but the docs' own checks' (which name
  what is gone, on purpose)."""
  out = {os.path.basename(path)[:-3] for path in _sources()}
  for path, text in _sources().items():
    if not path.startswith("tests/project/"):
      out.update(re.findall(r"[A-Za-z_]\w*", text))
  return frozenset(out)


@functools.cache
def _class_files() -> dict[str, list[str]]:
  out = {}
  for path, text in _sources().items():
    for name in re.findall(r"^[ \t]*class (\w+)", text, re.M):
      out.setdefault(name, []).append(path)
  return out


def project_classes(name: str) -> list[tuple[str, ast.ClassDef]]:
  """Every class ``name`` the project defines, as ``(path, node)``."""
  return [
    (path, node)
    for path in _class_files().get(name, ())
    for node in ast.walk(_tree(path))
    if isinstance(node, ast.ClassDef) and node.name == name
  ]


def check_inline(name: str, attr: str | None, call: str | None) -> str | None:
  """An inline-code identifier (``Name``, ``name(...)``, ``Class.attr``)."""
  if call and "(" in call[1:]:
    return None  # notation (``SelfComposed(PoissonSampled(p, ...), T)``)
  if attr and name[0].isupper():
    classes = project_classes(name)
    if not classes or any(
      _in_class(p, n, attr[1:]) is None for p, n in classes
    ):
      return None
    return f"no project class {name} has {attr[1:]!r}"
  if attr:
    return None  # ``value.attr``: not a project symbol's name
  looks = CAMEL.match(name) or (call is not None and SNAKE.match(name))
  if not looks or name in EXTERNAL or name in project_identifiers():
    return None
  return f"{name!r} is not a name in the project's code"


def stale_names(path: str) -> list[str]:
  """``'path:line: name: why'`` for each name in ``path`` that is not in
  the tree."""
  out = []
  with open(path) as f:
    lines = f.read().splitlines()
  for number, line in enumerate(lines, 1):
    found = []
    for m in PATH.finditer(line):
      found.append((m.group(0), check_path(m.group(1), m.group(2))))
    for m in DOTTED.finditer(line):
      if m.group(1).rsplit(".", 1)[1] not in FILE_SUFFIXES:
        found.append((m.group(1), resolve(m.group(1))))
    for m in INLINE.finditer(line):
      found.append((m.group(0), check_inline(*m.groups())))
    out += [f"{path}:{number}: {name}: {why}" for name, why in found if why]
  return out
