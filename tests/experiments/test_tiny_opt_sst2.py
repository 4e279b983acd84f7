"""``configs/tiny_opt_sst2.py`` end to end through the runner: DP-ZO on the
tiny random OPT fixture and the synthetic SST-2 task (the LLM path with
files that ship with the tests)."""

import math

import pytest

from configs import tiny_opt_sst2
from experiments import train

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")


def _config(**overrides):
  config = tiny_opt_sst2.get_config()
  for key, value in overrides.items():
    setattr(config, key, value)
  return config


def test_short_run_meets_the_target_epsilon():
  # secret noise (OS entropy), as the command runs it: the assertions
  # hold for every draw
  config = _config(num_steps=20, num_eval=64)
  result = train.train(config, progress=False)
  assert result["estimator"] == "dp_zo" and result["num_steps"] == 20
  assert result["private"] and result["noise_multiplier"] > 0
  # calibrated for 20 steps: just under the target, never above it
  assert 7.0 < result["epsilon"] <= config.target_epsilon
  assert result["delta"] == 1e-5
  assert math.isfinite(result["test_accuracy"])
  assert 0.0 <= result["test_accuracy"] <= 1.0


@pytest.mark.slow
def test_full_run_beats_chance():
  """The config as shipped (1,000 steps, about 40 s on two cores). Chance is
  0.5 (balanced labels; zero-shot 0.515 on the 200 evaluation rows); with
  this fixed test noise the run reaches 0.890 (docs/llm.md). Stated
  margin: 0.7."""
  config = _config(insecure_test_noise=True)  # reproducible: tests only
  result = train.train(config, progress=False)
  assert result["epsilon"] <= config.target_epsilon
  assert result["history"][0]["test_accuracy"] < 0.6  # zero-shot
  assert result["test_accuracy"] > 0.7, result["test_accuracy"]
