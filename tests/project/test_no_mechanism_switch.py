"""No code switches on a mechanism or neighbouring-relation name string
outside the mechanisms' own modules: each mechanism value states its own
accounting (``zoprivacy/mechanisms/values.py``) and relations are
``dp_accounting.NeighboringRelation`` members, so adding a mechanism touches
its module and the registry only. Read from the source with ``ast``."""

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
