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


def test_every_name_the_docs_use_after_import_zoprivacy_resolves():
  """Each ``zoprivacy.<name>`` in README.md and docs/*.md resolves after a
  plain ``import zoprivacy`` (a fresh interpreter: nothing imported before),
  as an export or a lazily imported submodule."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top

  root = DOC.parents[1]
  texts = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
  names = set()
  for path in texts:
    names |= set(re.findall(r"\bzoprivacy\.([A-Za-z_]\w*)", path.read_text()))
  names.discard("__all__")
  assert {"first_order", "core", "dpzero"} <= names
  code = (
    "import sys, zoprivacy\n"
    f"missing = [n for n in {sorted(names)!r} if not hasattr(zoprivacy, n)]\n"
    "print(missing); sys.exit(1 if missing else 0)\n"
  )
  out = subprocess.run(
    [sys.executable, "-c", code], capture_output=True, text=True, check=False
  )
  assert out.returncode == 0, out.stdout + out.stderr


def test_every_module_of_the_subpackages_resolves_from_the_top():
  """The modules grouped into subpackages are read from the top under their
  own names as well (``zoprivacy.per_example_check`` is
  ``zoprivacy.first_order.per_example_check``)."""
  import importlib  # pylint: disable=g-import-not-at-top

  flat = set(
    "blockwise_dot clipping counter_directions counter_hash directions "
    "discrete_mechanism estimator_manifest ghost_clipping layer_capture "
    "layerwise linalg masked_sums mechanisms mechanisms_accounting "
    "mechanisms_vector nnx_support per_example_check per_example_report "
    "projection queries sharding training_step trajectory validation "
    "vector_discrete_mechanism".split()
  )  # the modules that were at the root
  # mechanisms is now the package; estimator_manifest is a module of the
  # root again (beside the estimators, not in core, which it would read up).
  top = {"mechanisms", "estimator_manifest"}
  assert set(zoprivacy._MODULES) | top == flat  # pylint: disable=protected-access
  for name, module in zoprivacy._MODULES.items():  # pylint: disable=protected-access
    assert getattr(zoprivacy, name) is importlib.import_module(module), name
  assert zoprivacy.estimator_manifest is importlib.import_module(
    "zoprivacy.estimator_manifest"
  )
  assert zoprivacy.mechanisms.GaussianMechanism is (
    zoprivacy.mechanisms.noise.GaussianMechanism
  )
