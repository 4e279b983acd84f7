"""The public API is what docs/api.md documents, and nothing else."""

import pathlib
import re

import zoprivacy

DOC = pathlib.Path(__file__).parents[2] / "docs" / "api.md"


def test_api_doc_lists_exactly_dunder_all():
  documented = set(re.findall(r"^\| `(\w+)` \|", DOC.read_text(), re.M))
  assert documented == set(zoprivacy.__all__)


def test_every_export_resolves():
  for name in zoprivacy.__all__:
    assert getattr(zoprivacy, name) is not None, name


def test_unknown_attribute_is_an_attribute_error():
  try:
    zoprivacy.dpzer0  # noqa: B018
  except AttributeError as e:
    assert "dpzer0" in str(e)
  else:
    raise AssertionError("expected AttributeError")
