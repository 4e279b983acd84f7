"""The typed run: a config read once into frozen settings, no JAX needed.

The conversion keeps every value the run used to read from the config
(the workdir's fingerprint is the config as written), and nothing a callee
receives can change it."""

import dataclasses
import subprocess
import sys

import pytest

from configs import default, hidden_state_digits_logreg
from experiments.run import settings, workdir
from zoprivacy.estimators import registry


def _typed(**fields):
  c = default.get_config()
  c.update(fields)
  return c, settings.Settings.from_config(c)


def test_the_settings_hold_the_config_typed_and_as_written():
  c, s = _typed()
  assert (s.dataset, s.estimator, s.seed, s.num_steps) == (
    "digits",
    "dpzero",
    0,
    4000,
  )
  assert s.privacy.delta == 1e-5 and s.privacy.target.epsilon == 2.0
  assert s.mesh == settings.Mesh() and not s.distributed.enabled
  assert s.config_dict() == c.to_dict()  # the fingerprint's source
  s = s.with_learning_rate(registry.get("dpzero"))
  c.learning_rate = 0.02  # as the run filled it before
  assert workdir.fingerprint(s.config_dict()) == workdir.fingerprint(
    c.to_dict()
  )
  assert s.learning_rate_source == "dpzero's registered default"


def test_nothing_a_callee_gets_can_change_the_run():
  _, s = _typed()
  with pytest.raises(TypeError):
    s.estimator_kwargs["smoothing"] = 1.0  # type: ignore[index]
  with pytest.raises(dataclasses.FrozenInstanceError):
    s.num_steps = 1  # type: ignore[misc]
  task_config = s.task_config()
  with pytest.raises(AttributeError):
    task_config.seed = 1
  hash(s.estimator_kwargs)  # hashable, as a static argument must be
  assert s.config_dict()["estimator_kwargs"]["smoothing"] == 1e-3


def test_the_dataset_binds_the_steps_and_the_privacy_value():
  _, s = _typed(num_steps=None, num_epochs=2.0)
  with pytest.raises(ValueError, match="dataset size"):
    _ = s.privacy.value  # before the data, no value
  bound = s.for_dataset(1431)
  assert bound.num_steps == 45 and bound.epochs(45) == 2.0  # ceil(2*1431/64)
  value = bound.privacy.value
  assert value.sampling.dataset_size == 1431 and value.target.num_steps == 45
  assert bound.privacy.value is value  # built once
  assert bound.config_dict()["num_steps"] == 45  # result.json's echo


def test_the_task_and_estimator_fields_are_declared_ones():
  c = hidden_state_digits_logreg.get_config()
  s = settings.Settings.from_config(c)
  assert s.declared["l2"] == c.l2 and s.declared["radius"] == c.radius
  assert s.hidden_state == settings.HiddenState(**c.hidden_state.to_dict())
  assert "l2" not in dataclasses.asdict(s.privacy)


def test_the_settings_load_no_jax():
  code = (
    "import sys; from configs import default; "
    "from experiments.run import settings; "
    "settings.Settings.from_config(default.get_config()).for_dataset(1431)"
    ".privacy.value; print('jax' in sys.modules)"
  )
  out = subprocess.run(
    [sys.executable, "-c", code], capture_output=True, text=True, check=True
  )
  assert out.stdout.strip() == "False"
