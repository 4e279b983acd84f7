"""Nonsense never comes out as a result: a run gone non-finite stops with one
paragraph; the released (public) values are the logged training signal; a
hidden-state run logs none of them."""

import json
import types

import config_overrides
import numpy as np
import pytest

from configs import default
from experiments.run import (
  errors,
  estimator_switch,
  settings,
  train,
  training_signal,
)
from experiments.run.metrics import metric_names
from zoprivacy.estimators import registry
from zoprivacy.training import trajectory


def _switched(estimator: str, **fields):
  """The default config with ``--config.estimator=<estimator>`` applied as
  the command line applies it."""
  c = default.get_config()
  c.estimator = estimator
  estimator_switch.switch_estimator_kwargs(c, registry.get(estimator), {})
  c.update(dict(eval_every=0, checkpoint_every=0, insecure_test_noise=True))
  return config_overrides.apply(c, fields)


@pytest.mark.parametrize(
  "learning_rate,what",
  [
    (1e30, "values it released is not finite"),  # inf parameters at once
    (0.05, "times the RMS of the first 5 steps"),  # grows, stays finite
    (5.0, "exactly 0 for 20 steps"),  # below float precision: frozen
  ],
)
def test_a_diverging_run_stops_with_one_paragraph(learning_rate, what):
  c = _switched("mezo", learning_rate=learning_rate, num_steps=200)
  with pytest.raises(training_signal.DivergedError) as e:
    train.train(c, progress=False)
  message = str(e.value)
  assert isinstance(e.value, errors.user_errors())  # one paragraph, exit 2
  assert message.startswith("the run diverged at step ")
  assert what in message and "reports no result" in message
  assert f"learning_rate {learning_rate:g} is too large for mezo" in message
  assert "Fix: lower learning_rate" in message
  step = int(message.split("at step ")[1].split(":")[0])
  assert 1 <= step < 60
  assert len(errors.one_paragraph(e.value).splitlines()) <= 8


def test_released_statistics_are_the_logged_signal(tmp_path):
  """Each row's statistics are those of the values released since the
  previous row (checked against the trajectory log of the same run)."""
  c = default.get_config()
  c.update(
    dict(
      num_steps=20,
      eval_every=10,
      checkpoint_every=10,
      workdir=str(tmp_path),
      trajectory_log=True,
      insecure_test_noise=True,
      test_run=True,
    )
  )
  r = train.train(c, progress=False)
  assert metric_names(r["history"][-1]) == ["test_accuracy"]
  rows = [json.loads(x) for x in open(tmp_path / "metrics.jsonl")]
  assert [x["step"] for x in rows] == [0, 10, 20]
  assert all(rows[0][k] is None for k in training_signal.COLUMNS)
  released = trajectory.TrajectoryLog.load(tmp_path / "trajectory.bin").scalars
  for row, window in zip(rows[1:], (released[:10], released[10:20])):
    x = np.asarray(window, np.float64).ravel()
    assert row["released_mean"] == pytest.approx(x.mean(), rel=1e-6)
    assert row["released_rms"] == pytest.approx(np.sqrt((x * x).mean()))
    assert row["released_max_abs"] == pytest.approx(np.abs(x).max())
  assert (tmp_path / "report.png").stat().st_size > 1000
  header = open(tmp_path / "metrics.csv").readline().strip().split(",")
  assert header[-3:] == list(training_signal.COLUMNS)


def test_a_hidden_state_run_logs_no_released_values(tmp_path):
  c = _switched("noisy_zogd", num_steps=3, eval_every=1, workdir=str(tmp_path))
  config_overrides.apply(c, dict(registry.get("noisy_zogd").run_settings))
  config_overrides.apply(c, dict(target_epsilon=None, noise_multiplier=10.0))
  train.train(c, progress=False)
  rows = [json.loads(x) for x in open(tmp_path / "metrics.jsonl")]
  assert len(rows) == 4
  assert not any(k.startswith("released_") for row in rows for k in row)
  assert not (tmp_path / training_signal.FILE_NAME).exists()


def _fake_run(takes_setting: bool, num_steps: int = 10):
  config = default.get_config()
  config.update(dict(num_steps=num_steps, learning_rate=0.5))
  return types.SimpleNamespace(
    settings=settings.Settings.from_config(config),
    spec=types.SimpleNamespace(takes_setting=takes_setting),
    workdir=None,
    primary=True,
  )


def test_non_finite_parameters_stop_the_run_where_it_may_look():
  params = {"w": np.array([1.0, np.nan]), "step": np.array(3)}
  published = training_signal.Signal(_fake_run(False), 0)
  with pytest.raises(training_signal.DivergedError, match="at step 4: its"):
    published.check_params(params, 4)
  published.check_params({"w": np.ones(2)}, 4)
  # A hidden-state run publishes only its final iterate: only it is checked.
  hidden = training_signal.Signal(_fake_run(True), 0)
  hidden.check_params(params, 4)
  with pytest.raises(training_signal.DivergedError, match="at step 10"):
    hidden.check_params(params, 10)


def test_the_statistics_are_read_a_few_steps_late_and_all_at_a_row():
  signal = training_signal.Signal(_fake_run(False), 0)
  for step in range(1, 4):
    signal.record(step, np.array([1.0, step, step * step, step, 0.0]))
  assert len(signal.pending) == training_signal.LAG
  row = signal.row()
  assert not signal.pending
  assert row["released_mean"] == pytest.approx(2.0)
  assert row["released_rms"] == pytest.approx(np.sqrt(14 / 3))
  assert row["released_max_abs"] == 3.0
  assert signal.row() == dict.fromkeys(training_signal.COLUMNS)
