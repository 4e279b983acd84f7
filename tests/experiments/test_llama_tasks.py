"""The MeZO task suite on a Mistral-architecture model: the task loader
picks the model family from config.json, and DP-ZO with LoRA runs through
the runner's layer-wise step on the tiny Mistral fixture; configs/dpzo_table4_mistral.py
fails fast without weights."""

import math
import pathlib

import jax
import numpy as np
import pytest

from configs import dpzo_table4_mistral, tiny_opt_sst2
from experiments import tasks
from experiments.run import train
from experiments.run.errors import USER_ERRORS

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures"


@pytest.mark.slow  # ~19 s; the prefix task below runs the tiny Mistral
def test_dp_zo_lora_runs_on_the_tiny_mistral():
  config = tiny_opt_sst2.get_config()
  config.model_dir = str(FIXTURES / "tiny_mistral")
  assert config.layerwise  # the in-scan step, as for OPT
  config.lora_targets = r"self_attn/(q_proj|v_proj)/kernel$"
  config.num_train, config.num_eval, config.num_steps = 64, 32, 3
  task = tasks.get_task(config)
  adapters, frozen = task.init(jax.random.key(0))
  assert frozen["layers"]["self_attn"]["k_proj"]["kernel"].shape == (2, 64, 32)
  assert set(adapters["layers"]["self_attn"]) == {"q_proj", "v_proj"}
  result = train.train(config, progress=False)
  assert result["num_steps"] == 3 and result["private"]
  assert 0 < result["epsilon"] <= config.privacy.target_epsilon
  assert math.isfinite(result["test_accuracy"])


def test_prefix_task_on_the_tiny_mistral():
  """peft='prefix' on a Llama-family model: the task's adapters are the
  prefix keys and values (2 key/value heads of 16: width 32), the merged
  model's losses are finite, and the in-scan loss equals the task's."""
  config = tiny_opt_sst2.get_config()
  config.model_dir = str(FIXTURES / "tiny_mistral")
  config.peft, config.num_prefix_tokens = "prefix", 4
  config.num_train, config.num_eval = 16, 8
  task = tasks.get_task(config)
  adapters, frozen = task.init(jax.random.key(0))
  sa = adapters["layers"]["self_attn"]
  assert set(sa) == {"prefix_keys", "prefix_values"}
  assert sa["prefix_keys"].shape == (2, 4, 32), sa["prefix_keys"].shape
  batch = jax.tree.map(lambda a: a[:4], (task.train_inputs, task.train_labels))
  losses = jax.jit(task.batched_loss)(adapters, frozen, batch)
  in_scan = jax.jit(task.perturbed_loss)(adapters, frozen, batch, None)
  np.testing.assert_allclose(in_scan, losses, rtol=1e-5)
  assert np.all(np.isfinite(losses))


def test_table4_config_fails_fast_without_weights(tmp_path):
  config = dpzo_table4_mistral.get_config()
  assert config.layerwise and config.estimator == "dp_zo"
  config.model_dir = str(tmp_path / "Mistral-7B-v0.1")
  config.data_dir = str(tmp_path)
  with pytest.raises(USER_ERRORS) as e:
    train.train(config, progress=False)
  assert "config.json" in str(e.value) or "dev-v1.1.json" in str(e.value)
