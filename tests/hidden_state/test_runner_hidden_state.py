"""The runner's Noisy-ZOGD path: three epsilons, refusal, checks before data."""

import pytest

from configs import hidden_state_digits_logreg
from experiments import tasks
from experiments.run import (
  final_iterate,
  hidden_state_run,
  report,
  settings,
  train,
)


def small_config(**changes):
  config = hidden_state_digits_logreg.get_config()
  config.num_steps = 4
  config.estimator_kwargs.num_directions = 20
  config.estimator_kwargs.noise_std = 0.05
  for key, value in changes.items():
    target = config
    *path, last = key.split(".")
    for name in path:
      target = target[name]
    target[last] = value
  return config


def test_report_has_three_final_iterate_epsilons():
  result = train.train(small_config(), progress=False)
  block = result["final_iterate"]
  for name in (
    "hidden_state_epsilon",
    "composition_epsilon",
    "output_perturbation_epsilon",
  ):
    assert set(block[name]) == {"standard", "improved"}
  # The ledger's composition (PLD) is at most the RDP composition figure.
  assert result["epsilon"] <= block["composition_epsilon"]["improved"]
  assert block["hidden_state_epsilon"]["improved"] <= (
    block["composition_epsilon"]["improved"] * (1 + 1e-9)
  )
  assert block["condition_ratio"] == pytest.approx(0.5)
  text = report.format_report(result)
  assert "hidden state (Thm 3.2)" in text and "replace-one" in text
  assert 0.0 <= result["test_accuracy"] <= 1.0
  print(text)


def test_final_iterate_epsilon_refused_when_intermediates_published():
  cases = {
    "eval_every": (dict(eval_every=2), "eval_every=2"),
    "checkpoints": (
      dict(
        workdir="/tmp/x",
        checkpoint_every=2,
        **{"hidden_state.checkpoints_private": False},
      ),
      "checkpoint_every=2",
    ),
    "trajectory": (dict(trajectory_log=True), "trajectory log"),
  }
  for changes, reason in cases.values():
    config = settings.Settings.from_config(small_config(**changes))
    block = final_iterate.final_iterate(
      config, ledger=None, num_steps=config.num_steps
    )
    assert reason in block["refused"] and "intermediate" in block["refused"]
    assert "not reported" in final_iterate.format_block(block, 1.0)
  # Private checkpoints for resuming, no evaluation: nothing is published.
  assert not hidden_state_run.published_outputs(
    settings.Settings.from_config(
      small_config(workdir="/tmp/x", checkpoint_every=2)
    )
  )


@pytest.mark.parametrize(
  "changes, match",
  [
    ({"estimator_kwargs.num_directions": 400}, "d >= 2K"),
    ({"radius": 0.0}, "radius"),
    ({"l2": None}, "l2 must be a number"),
    ({"privacy.sampling": "poisson"}, "not 'poisson'"),
    ({"radius": None}, "radius must be a number"),
    ({"estimator_kwargs.smoothing": None}, "smoothing must be a number"),
    ({"estimator_kwargs.directional_fraction": 1.5}, r"\[0, 1\]"),
    ({"learning_rate": 1000.0}, "above the limit"),
    ({"dataset": "digits"}, "assumptions"),
    ({"privacy.clip": 1.0}, "Lipschitz"),
    ({"estimator_kwargs.clip": 1.0}, "now privacy.clip"),
  ],
)
def test_bad_input_fails_before_any_data_is_loaded(monkeypatch, changes, match):
  def no_data(config):
    raise AssertionError("data was touched")

  monkeypatch.setattr(tasks, "get_task", no_data)
  with pytest.raises(ValueError, match=match):
    train.train(small_config(**changes), progress=False)
