"""The JAX-free manifest of the registry's declarations never goes stale."""

import configparser
import inspect
import os
import subprocess
import sys

import pytest

from zoprivacy import estimator_manifest
from zoprivacy.estimators import manifest, registry

ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
REGENERATE = "run: python -m zoprivacy.estimators.manifest --write"


def test_the_manifest_is_what_the_live_registry_and_optax_give():
  live = manifest.build()
  written = estimator_manifest.load()
  assert [e["name"] for e in written["estimators"]] == [
    e["name"] for e in live["estimators"]
  ], f"estimators added or removed; {REGENERATE}"
  for entry, expected in zip(written["estimators"], live["estimators"]):
    assert entry == expected, f"{entry['name']} changed; {REGENERATE}"
  if written["optax"]["version"] != live["optax"]["version"]:
    # Another installed optax (e.g. the oldest supported): its names are
    # not the manifest's, so the command line leaves the optimizer's name
    # to the live check.
    assert estimator_manifest.optax_names() is None
    return
  assert written["optax"] == live["optax"], f"optax changed; {REGENERATE}"
  with open(estimator_manifest.PATH, encoding="utf-8") as f:
    assert f.read() == manifest.dumps(live), REGENERATE


def test_the_reader_gives_the_registry_declarations():
  for name, declaration in estimator_manifest.declarations().items():
    spec = registry.get(name)
    assert declaration.private == spec.private
    assert declaration.takes_setting == spec.takes_setting
    assert declaration.sampling == spec.sampling
    assert declaration.parameters == tuple(
      inspect.signature(spec.factory).parameters
    )
    # JSON has no tuples: a tuple default reads back as a list.
    assert [[k, v] for k, v in declaration.defaults] == [
      [k, manifest.jsonable(v)] for k, v in spec.defaults
    ]


@pytest.mark.parametrize("name", ["dpzer0", "zzz", None])
def test_an_unknown_name_raises_the_registry_message(name):
  with pytest.raises(KeyError) as live:
    registry.get(name)
  with pytest.raises(KeyError) as read:
    estimator_manifest.get(name)
  assert str(read.value) == str(live.value)


def test_reading_the_manifest_loads_no_jax():
  code = (
    "import sys; from zoprivacy import estimator_manifest as m; "
    "m.get('dpzero'); m.optax_names(); "
    "assert not {'jax', 'optax'} & set(sys.modules), sorted(sys.modules)"
  )
  subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_the_wheel_ships_the_manifest():
  setup = configparser.ConfigParser()
  setup.read(os.path.join(ROOT, "setup.cfg"))
  data = setup["options.package_data"]["zoprivacy.estimators"].split()
  assert os.path.basename(estimator_manifest.PATH) in data
