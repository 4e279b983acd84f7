"""Each task declares what it reads beside its builder, and the JAX-free
manifest that a command line checks a config against is theirs, never
stale."""

import os
import subprocess
import sys

import ml_collections
import pytest

from configs import default
from experiments import tasks
from experiments.run import config_fields
from experiments.tasks import manifest, registry

ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
REGENERATE = "run: python -m experiments.tasks.manifest --write"


def test_the_manifest_is_what_the_tasks_register():
  live = manifest.build()
  with open(registry.MANIFEST, encoding="utf-8") as f:
    assert f.read() == manifest.dumps(live), REGENERATE
  assert registry.shipped() == {
    e["name"]: registry.declarations()[e["name"]] for e in live["tasks"]
  }


def test_every_built_in_task_declares_its_fields_and_is_shipped():
  builtin = [
    name for name, builder in tasks.TASKS.items() if registry.built_in(builder)
  ]
  assert len(builtin) >= 33 and set(builtin) == set(registry.shipped())
  assert all(registry.shipped()[n].fields is not None for n in builtin)
  # The llm tasks (functools.partial builders) are the package's too.
  assert registry.shipped()["sst2_opt"].fields


def test_reading_the_declarations_loads_no_jax():
  code = (
    "import sys; from experiments.run import config_fields as c; "
    "from experiments.tasks import registry as r; "
    "assert r.declaration('sst2_opt').fields and c.task_fields()['imdb']; "
    "assert r.declaration('mnli').public_splits == ('snli',); "
    "assert 'jax' not in sys.modules, sorted(sys.modules)"
  )
  env = {**os.environ, "PYTHONPATH": ROOT}
  subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)


def test_a_task_registered_elsewhere_declares_its_own(monkeypatch):
  """As a reproduction registers one: its fields and public splits are
  checked like a built-in task's; registered without fields, its public
  data is left to the run."""
  monkeypatch.setattr(registry, "TASKS", dict(registry.TASKS))
  monkeypatch.setattr(registry, "_DECLARED", dict(registry._DECLARED))  # pylint: disable=protected-access
  registry.register("elsewhere", fields=("depth",), public_splits=("web",))(
    lambda config: None
  )
  registry.register("undeclared")(lambda config: None)
  for name in ("elsewhere", "digits"):  # a built-in name, before they load
    with pytest.raises(ValueError, match="registered twice"):
      registry.register(name)(lambda config: None)
  c = default.get_config()
  c.update({"dataset": "elsewhere", "depth": 3, "public": "web"})
  config_fields.check(c)
  config_fields.check_public(c, "pazo_m", "batch")
  c.public = "news"
  with pytest.raises(ValueError, match="its splits: 'web'"):
    config_fields.check_public(c, "pazo_m", "batch")
  c.dataset = "undeclared"
  config_fields.check_public(c, "pazo_m", "batch")  # left to the run
  with pytest.raises(config_fields.UnknownFieldError, match="'depth'"):
    config_fields.check(c)
  assert registry.declaration("nope") is None


def test_a_builder_that_writes_to_its_read_only_config_is_told_how(
  monkeypatch,
):
  def writes(config):
    config.seed = 7  # the runner hands builders a FrozenConfigDict

  monkeypatch.setitem(registry.TASKS, "writes_config", writes)
  config = ml_collections.FrozenConfigDict({"dataset": "writes_config"})
  with pytest.raises(ValueError) as refused:
    registry.build_task(config)
  message = str(refused.value)
  assert "'writes_config'" in message and "read-only" in message
  assert "ml_collections.ConfigDict(config)" in message
