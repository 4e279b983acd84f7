"""Each estimator registers the learning rate that suits it; switching
estimator without a learning rate gets it, and one the user sets (in the
config file or on the command line) always wins."""

import pytest

from configs import default, dp_sgd, dp_zo_gaussian, dpgd_zeroth, mezo
from experiments.run import cli, report, settings, train
from zoprivacy import estimator_manifest
from zoprivacy.estimators import registry


def test_every_estimator_registers_a_learning_rate():
  for name in registry.names():
    spec = registry.get(name)
    if spec.takes_setting:  # Noisy-ZOGD: its theorem's step size limit
      assert spec.learning_rate is None
    else:
      assert spec.learning_rate > 0, name
    assert estimator_manifest.get(name).learning_rate == spec.learning_rate


@pytest.mark.parametrize(
  "module", [default, mezo, dp_sgd, dp_zo_gaussian, dpgd_zeroth]
)
def test_the_registered_rate_is_the_one_of_the_estimators_own_config(module):
  config = module.get_config()
  spec = registry.get(config.estimator)
  expected = 0.02 if module is default else config.learning_rate
  assert spec.learning_rate == expected


def test_a_switched_estimator_gets_its_own_rate_and_a_set_one_wins(
  monkeypatch,
):
  monkeypatch.setitem(cli._LATE, "estimator_kwargs", {})  # pylint: disable=protected-access
  c = default.get_config()
  c.estimator = "mezo"
  cli.apply_late_overrides(c, argv_had_estimator=True)
  assert _rate(c) == (0.001, "mezo's registered default")
  c.learning_rate = 0.0005  # --config.learning_rate=0.0005
  assert _rate(c) == (0.0005, "set by the config")
  # A config file's own rate wins over the switched estimator's.
  c = mezo.get_config()
  c.estimator = "dpzero"
  cli.apply_late_overrides(c, argv_had_estimator=True)
  assert _rate(c)[0] == 0.001
  # The run resolves its settings: the caller's config keeps None.
  c = default.get_config()
  typed = settings.Settings.from_config(c).with_learning_rate(
    registry.get("mezo")
  )
  assert (typed.learning_rate, c.learning_rate) == (0.001, None)
  assert typed.config_dict()["learning_rate"] == 0.001  # the fingerprint's


def _rate(c):
  """``(learning rate, source)`` the run of ``c`` resolves."""
  typed = settings.Settings.from_config(c)
  typed = typed.with_learning_rate(registry.get(c.estimator))
  return typed.learning_rate, typed.learning_rate_source


def test_mezo_by_override_learns_with_its_rate_and_the_report_says_whose(
  monkeypatch, tmp_path
):
  """The default config with ``--config.estimator=mezo``: DPZero's 0.02 made
  MeZO diverge; MeZO's own 0.001 learns."""
  monkeypatch.setitem(cli._LATE, "estimator_kwargs", {})  # pylint: disable=protected-access
  c = default.get_config()
  c.estimator = "mezo"
  c.update(dict(num_steps=300, eval_every=0, checkpoint_every=0))
  c.update(dict(insecure_test_noise=True, workdir=str(tmp_path)))
  cli.apply_late_overrides(c, argv_had_estimator=True)
  r = train.train(c, progress=False)
  assert r["learning_rate"] == 0.001
  assert "learning rate: 0.001 (mezo's registered default)" in (
    report.format_report(r)
  )
  assert r["test_accuracy"] > 0.15  # chance: 0.10
