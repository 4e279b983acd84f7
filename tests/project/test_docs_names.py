"""Every config file, module and Python name the docs give exists.

tests/project/test_docs_commands.py runs the documented commands; this
checks the names in prose (README.md, REPRODUCTION.md, docs/*.md),
statically (tests/project/doc_names.py: file existence and ast, no JAX).
"""

import os

import pytest

from tests.project import doc_names

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


@pytest.fixture(autouse=True)
def _at_the_root(monkeypatch):
  monkeypatch.chdir(ROOT)


def test_every_name_the_docs_give_exists():
  stale = [s for path in doc_names.DOCS for s in doc_names.stale_names(path)]
  assert not stale, "\n".join(stale)


GOOD = """
Run `python -m experiments.run --config configs/default.py`; see
`experiments/run/loop.py`, `zoprivacy.PrivacyPlan`, `zoprivacy.dpzero(...)`,
`zoprivacy.privacy.plan.PrivacyPlan.describe`, `experiments.run.train.train`,
`zoprivacy.ExactNoiseSource`, `zoprivacy.accounting.pld_epsilon`,
`Task.metric_names`, `PrivacyPlan`, `find_plan(state)`, `docs/experiments.md`,
`tests/project/test_docs_names.py::test_every_name_the_docs_give_exists`,
dp_accounting's `PLDAccountant`, `configs/<name>.py`, `tests/project/test_*.py`
and the math `SelfComposed(PoissonSampled(p, Gaussian(sigma)), T)`.
"""
BAD = {
  "configs/dpzo_table9_qnli.py": "no file",
  "experiments/run/nope.py": "no file",
  "tests/project/test_docs_names.py::test_gone": "has no 'test_gone'",
  "zoprivacy.privacy.NoSuchPlan": "defines no 'NoSuchPlan'",
  "zoprivacy.no_such_export": "defines no 'no_such_export'",
  "experiments.run.train.no_such_function": "defines no",
  "zoprivacy.privacy.plan.PrivacyPlan.no_such_method": "has no",
  "`Task.no_such_field`": "has 'no_such_field'",
  "`PrivacyPlann`": "not a name in the project's code",
  "`find_plans(state)`": "not a name in the project's code",
}


def test_the_check_finds_what_is_gone_and_passes_what_is_there(tmp_path):
  good = tmp_path / "good.md"
  good.write_text(GOOD)
  assert doc_names.stale_names(str(good)) == []
  bad = tmp_path / "bad.md"
  bad.write_text("\n".join(f"see {name} here." for name in BAD))
  found = doc_names.stale_names(str(bad))
  assert len(found) == len(BAD), "\n".join(found)
  for line, (name, why) in zip(found, BAD.items()):
    assert name in line and why in line, line
