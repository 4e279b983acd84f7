"""Every registered estimator is reachable by override on the default config:
``--config.estimator=NAME`` plus only what the refusal names (the public
split, Noisy-ZOGD's settings), through the runner's own override path, for a
few steps at the default target epsilon."""

import config_overrides
import pytest

from configs import default
from experiments.run import cli, report, train
from zoprivacy.estimators import registry

# A non-private and a hidden-state one in the default suite (the private
# ones compile and calibrate for longer: pazo_m by override also runs in
# test_new_user_roads.py); the others in CI's slow step.
FAST = ("mezo", "noisy_zogd")


def _overrides(name: str) -> tuple[dict, dict]:
  """``(fields, estimator_kwargs)``: what the refusals name for
  ``--config.estimator=NAME`` on the default config (the public split, the
  run settings, a hyperparameter without a default): nothing else."""
  spec = registry.get(name)
  fields = dict(spec.run_settings)
  if spec.public_data:
    fields["public"] = "stratified4"
  return fields, dict.fromkeys(spec.required, 2)  # GEP: num_bases


@pytest.mark.parametrize(
  "name",
  [
    pytest.param(n, marks=() if n in FAST else pytest.mark.slow)
    for n in sorted(registry.names())
  ],
)
def test_every_estimator_runs_by_override_on_the_default_config(
  name, monkeypatch
):
  fields, kwargs = _overrides(name)
  monkeypatch.setitem(cli._LATE, "estimator_kwargs", kwargs)  # pylint: disable=protected-access
  monkeypatch.setitem(cli._LATE, "switched", True)  # pylint: disable=protected-access
  monkeypatch.setitem(cli._LATE, "fields", {})  # pylint: disable=protected-access
  config = default.get_config()
  config.update(dict(estimator=name, num_steps=3, eval_every=0))
  config.update(dict(checkpoint_every=0, check_per_example=False))
  config_overrides.apply(config, fields)
  cli.check_declared(config)  # what the command line checks before JAX
  cli.apply_late_overrides(config)
  result = train.train(config, progress=False)
  assert result["estimator"] == name and result["num_steps"] == 3
  assert 0.0 <= result["test_accuracy"] <= 1.0
  text = report.format_report(result)
  assert f"estimator: {name} on " in text
  if registry.get(name).private:
    assert result["epsilon"] <= 2.0 * (1 + 1e-3)
  if not registry.get(name).takes_setting:
    assert result["learning_rate"] == registry.get(name).learning_rate


def test_the_override_needs_are_all_named_by_the_refusals(monkeypatch):
  """Without what :func:`_overrides` adds, the command line's checks refuse
  ``--config.estimator=NAME`` naming exactly those fields."""
  monkeypatch.setitem(cli._LATE, "estimator_kwargs", {})  # pylint: disable=protected-access
  monkeypatch.setitem(cli._LATE, "switched", True)  # pylint: disable=protected-access
  for name in registry.names():
    fields, kwargs = _overrides(name)
    needs = [*fields, *(f"estimator_kwargs.{k}" for k in kwargs)]
    config = default.get_config()
    config.estimator = name
    shown = ""
    for _ in range(2):  # the settings first, then a missing hyperparameter
      try:
        cli.check_declared(config)
        break
      except ValueError as e:
        shown += str(e)
        config_overrides.apply(config, fields)
    for field in needs:
      assert f"--config.{field}=" in shown, (name, field, shown)
    if not needs:
      assert not shown, shown
