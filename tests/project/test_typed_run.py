"""Below the resolution, the runner reads the typed run, never the raw config.

The resolution turns a config into its typed
:class:`experiments.run.settings.Settings` once
(:func:`experiments.run.resolution.resolve`); only its modules read the
``ml_collections`` config. Everywhere else in ``experiments/run``, no
function takes a parameter named ``config`` (the entry point
``train.train`` converts on its first lines) and nothing reads
``run.config``. Every field of the :class:`~experiments.run.resolved_run.Run`
and of the settings' classes has a type; one typed ``Any`` says why in a
comment (a field whose type names ``Any`` anywhere). Read from the
source with ``ast``.
"""

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "run"

# The resolution: these read (or edit, on the command line) the raw config.
RESOLUTION = {
  "cli",
  "config_defaults",
  "config_fields",
  "config_numbers",  # preflight's checks of the numbers
  "estimator_switch",  # the command line's edit of the config it loaded
  "preflight",
  "privacy_config",
  "resolution",
  "settings",
}
# Entry points that take a user's config and convert it at once.
ENTRY = {("train", "train")}
TYPED = {
  "resolved_run": ("Run",),
  "settings": ("Settings", "RunPrivacy", "Mesh", "Distributed", "HiddenState"),
}


def _modules():
  for path in sorted(ROOT.glob("*.py")):
    yield path.stem, path.read_text(), ast.parse(path.read_text())


def _exempt(module: str, function: str) -> bool:
  return (module, function) in ENTRY


def _functions(tree):
  for node in ast.walk(tree):
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
      yield node


def violations() -> list[str]:
  out = []
  for module, _, tree in _modules():
    if module in RESOLUTION:
      continue
    for fn in _functions(tree):
      args = fn.args
      names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
      if "config" in names and not _exempt(module, fn.name):
        out.append(f"{module}.{fn.name}:{fn.lineno} takes config")
    for node in ast.walk(tree):
      if (
        isinstance(node, ast.Attribute)
        and node.attr == "config"
        and (
          (isinstance(node.value, ast.Name) and node.value.id == "run")
          or (
            isinstance(node.value, ast.Attribute) and node.value.attr == "run"
          )
        )
      ):
        out.append(f"{module}:{node.lineno} reads run.config")
  return out


def untyped_fields() -> list[str]:
  out = []
  for module, text, tree in _modules():
    lines = text.splitlines()
    for node in tree.body:
      if not isinstance(node, ast.ClassDef):
        continue
      if node.name not in TYPED.get(module, ()):
        continue
      for item in node.body:
        if not isinstance(item, ast.AnnAssign):
          continue
        annotation = ast.unparse(item.annotation)
        line = lines[item.lineno - 1]
        above = lines[item.lineno - 2].strip()
        said = "#" in line or above.startswith("#")
        if "Any" in re.findall(r"\w+", annotation) and not said:
          out.append(f"{module}.{node.name}.{ast.unparse(item.target)}")
  return out


def test_nothing_below_the_resolution_reads_the_raw_config():
  assert violations() == []


def test_the_typed_classes_exist():
  found = {
    (module, node.name)
    for module, _, tree in _modules()
    for node in tree.body
    if isinstance(node, ast.ClassDef)
  }
  wanted = {(m, c) for m, names in TYPED.items() for c in names}
  assert wanted <= found, wanted - found


def test_every_run_and_settings_field_has_a_type():
  assert untyped_fields() == []
