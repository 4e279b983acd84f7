"""No code switches on a mechanism or neighbouring-relation name string
outside the mechanisms' own modules, and no table in the library is keyed
by one outside them and the one relation table: each mechanism value states
its own accounting and calibration (``zoprivacy/mechanisms/values.py``),
the registry selects it by name, and relations are
``dp_accounting.NeighboringRelation`` members
(``zoprivacy/accounting/relations.py`` converts names), so adding a
mechanism touches its module and the registry only. Read from the source
with ``ast``."""

import ast
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
NAMES = {
  "gaussian",
  "laplace",
  "discrete_gaussian",
  "discrete_laplace",
  "add_or_remove",
  "add_or_remove_one",
  "replace_one",
}
# The mechanisms' own modules (the value classes, the runtime mechanisms and
# the discrete mechanisms' PLDs).
OWN = (
  "zoprivacy/mechanisms/",
  "zoprivacy/secret_noise/vector_discrete_mechanism.py",
)
# The same words naming something else than a mechanism or a relation.
OTHER_MEANING = {
  ("zoprivacy/zo/directions.py", "gaussian"): "a direction distribution",
  (
    "zoprivacy/zo/counter_directions.py",
    "gaussian",
  ): "a direction distribution",
  (
    "zoprivacy/zo/counter_generators.py",
    "gaussian",
  ): "a direction distribution",
}


def _switches(path: pathlib.Path):
  for node in ast.walk(ast.parse(path.read_text())):
    if not isinstance(node, ast.Compare):
      continue
    for side in [node.left, *node.comparators]:
      values = side.elts if isinstance(side, (ast.Tuple, ast.List)) else [side]
      for v in values:
        if isinstance(v, ast.Constant) and v.value in NAMES:
          yield node.lineno, v.value


def _tables(path: pathlib.Path):
  """Dictionary keys and subscripts that are a mechanism or relation name."""
  for node in ast.walk(ast.parse(path.read_text())):
    keys = node.keys if isinstance(node, ast.Dict) else []
    if isinstance(node, ast.Subscript):
      keys = [node.slice]
    for k in keys:
      if isinstance(k, ast.Constant) and k.value in NAMES:
        yield node.lineno, k.value


def _offenders(files):
  out = []
  for path in files:
    rel = str(path.relative_to(REPO))
    if rel.startswith(OWN):
      continue
    for line, name in _switches(path):
      if (rel, name) not in OTHER_MEANING:
        out.append(f"{rel}:{line} compares with {name!r}")
  return out


def test_no_string_switch_on_a_mechanism_or_relation():
  files = sorted(
    p for d in ("zoprivacy", "experiments") for p in (REPO / d).rglob("*.py")
  )
  offenders = _offenders(files)
  assert not offenders, "\n".join(offenders)


def test_no_table_keyed_by_a_mechanism_or_relation_name():
  tables = []
  for path in sorted((REPO / "zoprivacy").rglob("*.py")):
    rel = str(path.relative_to(REPO))
    if rel.startswith(OWN) or rel == "zoprivacy/accounting/relations.py":
      continue
    tables += [f"{rel}:{line} keys {name!r}" for line, name in _tables(path)]
  assert not tables, "\n".join(tables)


@pytest.mark.parametrize(
  "source",
  ["T = {'gaussian': 1, 'laplace': 2}\n", "f = BUILDERS['laplace']\n"],
)
def test_the_check_sees_a_table(tmp_path, source):
  path = tmp_path / "m.py"
  path.write_text(source)
  assert list(_tables(path))


@pytest.mark.parametrize(
  "source",
  [
    "x = plan.mechanism == 'laplace'\n",
    "if rel in ('replace_one', 'other'):\n  pass\n",
  ],
)
def test_the_check_sees_a_switch(tmp_path, source):
  path = tmp_path / "m.py"
  path.write_text(source)
  assert list(_switches(path))
