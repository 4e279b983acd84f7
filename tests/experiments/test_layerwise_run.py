"""``config.layerwise``: the runner's in-scan step on the tiny OPT fixture
equals the generic step, and refuses what it cannot run."""

import jax
import numpy as np
import pytest

from configs import default, tiny_opt_sst2
from experiments import tasks
from experiments.run import checkpointing, train


def _config(**overrides):
  config = tiny_opt_sst2.get_config()
  assert config.layerwise  # the LLM configs' default
  config.num_steps = 4
  config.num_eval = 32
  config.num_train = 64
  config.privacy.target_epsilon = None
  config.privacy.noise_multiplier = 1.0
  config.insecure_test_noise = True  # the same noise in both runs: tests
  config.check_per_example = False  # checked by the other LLM tests
  for key, value in overrides.items():
    setattr(config, key, value)
  return config


def _train(config, monkeypatch):
  """The result and the final trainable parameters (read where the runner
  digests them)."""
  seen = []
  digest = checkpointing.tree_digest
  monkeypatch.setattr(
    checkpointing,
    "tree_digest",
    lambda tree: seen.append(jax.device_get(tree)) or digest(tree),
  )
  result = train.train(config, progress=False)
  return result, seen[-1]


@pytest.mark.slow  # two runs of a tiny OPT (~30 s): in CI's slow step
def test_layerwise_run_equals_the_generic_run(monkeypatch):
  """Four DP-ZO steps of full fine-tuning (every layer, and the tied
  embedding perturbed where it is used), the same keys and test noise: the
  same privacy plan and epsilon, and parameters within 1e-4 of the update's
  size (float32 rounding differs between the two structures and is divided
  by 2l, and a per-example scalar may round to a neighbouring point of the
  exact-noise grid). LoRA and prefix adapters on the in-scan step are
  checked against the generic step in tests/models."""
  peft = "full"
  generic, p_generic = _train(_config(peft=peft, layerwise=False), monkeypatch)
  in_scan, p_scan = _train(_config(peft=peft, layerwise=True), monkeypatch)
  for key in ("epsilon", "privacy_plan", "noise_multiplier"):
    assert in_scan[key] == generic[key], key
  config = _config(peft=peft)
  init, _ = tasks.get_task(config).init(jax.random.key(config.seed))
  moved = max(
    float(np.max(np.abs(a - b)))
    for a, b in zip(jax.tree.leaves(p_generic), jax.tree.leaves(init))
  )
  assert moved > 1e-4
  diff = max(
    float(np.max(np.abs(a - b)))
    for a, b in zip(jax.tree.leaves(p_generic), jax.tree.leaves(p_scan))
  )
  assert diff <= 1e-4 * moved + 1e-7, (diff, moved)


def test_layerwise_run_refuses_what_it_cannot_run():
  with pytest.raises(ValueError, match="plain SGD"):
    train.train(_config(layerwise=True, optimizer="adam"), progress=False)
  with pytest.raises(ValueError, match="runs mezo, dpzero, dp_zo"):
    train.train(
      _config(layerwise=True, estimator="dp_sgd", estimator_kwargs={}),
      progress=False,
    )

  threefry = _config(layerwise=True)
  threefry.estimator_kwargs.direction_prng = "threefry"
  with pytest.raises(ValueError, match="counter hash only"):
    train.train(threefry, progress=False)

  image = default.get_config()  # an image task: no in-scan loss
  image.layerwise = True
  image.estimator_kwargs.direction_prng = "counter"
  with pytest.raises(ValueError, match="needs a task with an in-scan loss"):
    train.train(image, progress=False)
