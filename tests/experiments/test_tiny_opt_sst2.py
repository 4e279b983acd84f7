"""``configs/tiny_opt_sst2.py`` end to end through the runner: DP-ZO on the
tiny random OPT fixture and the synthetic SST-2 task (the LLM path with
files that ship with the tests)."""

import math

import pytest

from configs import tiny_opt_sst2
from experiments import tasks
from experiments.run import train

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")


def _config(**overrides):
  config = tiny_opt_sst2.get_config()
  for key, value in overrides.items():
    setattr(config, key, value)
  return config


@pytest.mark.slow  # ~23 s; test_mezo_tasks runs an LLM task end to end
def test_short_run_meets_the_target_epsilon():
  # secret noise (OS entropy), as the command runs it: the assertions
  # hold for every draw
  config = _config(num_steps=20, num_eval=64)
  result = train.train(config, progress=False)
  assert result["estimator"] == "dp_zo" and result["num_steps"] == 20
  assert result["private"] and result["noise_multiplier"] > 0
  # calibrated for 20 steps: just under the target, never above it
  assert 7.0 < result["epsilon"] <= config.privacy.target_epsilon
  assert result["delta"] == 1e-5
  assert math.isfinite(result["test_accuracy"])
  assert 0.0 <= result["test_accuracy"] <= 1.0


@pytest.mark.slow
@pytest.mark.integration
def test_full_run_beats_chance():
  """The config as shipped (1,000 steps, about 40 s on two cores). Chance is
  0.5 (balanced labels; zero-shot 0.515 on the 200 evaluation rows); with
  this fixed test noise and the config's exact discrete noise the run
  reaches 0.850 (docs/llm.md). Stated
  margin: 0.7."""
  config = _config(insecure_test_noise=True)  # reproducible: tests only
  result = train.train(config, progress=False)
  assert result["epsilon"] <= config.privacy.target_epsilon
  assert result["history"][0]["test_accuracy"] < 0.6  # zero-shot
  assert result["test_accuracy"] > 0.7, result["test_accuracy"]


@pytest.mark.slow  # ~25 s: in CI's slow step
def test_16bit_weights_train_float32_adapters():
  """``param_dtype='bfloat16'`` or ``'float16'`` with LoRA: the frozen
  weights are stored in the dtype, the trained adapters in float32; the
  task's losses are those of the float32 model to 16-bit rounding, and the
  layer-wise runner trains on the mixed tree."""
  import jax
  import numpy as np

  losses = {}
  for name in ("float32", "bfloat16", "float16"):
    task = tasks.get_task(_config(param_dtype=name, num_eval=16))
    trainable, frozen = task.init(jax.random.key(0))
    assert {x.dtype.name for x in jax.tree.leaves(trainable)} == {"float32"}
    assert {x.dtype.name for x in jax.tree.leaves(frozen)} == {name}
    batch = jax.tree.map(
      lambda a: a[:8], (task.train_inputs, task.train_labels)
    )
    losses[name] = np.asarray(
      jax.jit(task.batched_loss)(trainable, frozen, batch)
    )
  for name in ("bfloat16", "float16"):
    np.testing.assert_allclose(losses[name], losses["float32"], rtol=0.05)
  result = train.train(
    _config(param_dtype="bfloat16", num_steps=2, num_eval=16), progress=False
  )
  assert result["num_steps"] == 2 and math.isfinite(result["test_accuracy"])
  with pytest.raises(ValueError, match="param_dtype='float64'"):
    tasks.get_task(_config(param_dtype="float64"))


def _full(dtype, **overrides):
  """Full fine-tuning of the tiny OPT with weights stored in ``dtype``:
  DP-ZO at the config's privacy, step size 1e-3 (the tiny model's full
  fine-tuning learns at it in a few hundred steps; the config's 1e-2 is
  LoRA's), reproducible test noise."""
  fields = dict(
    peft="full",
    param_dtype=dtype,
    learning_rate=1e-3,
    insecure_test_noise=True,
  )
  return _config(**{**fields, **overrides})


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
  "layerwise,dtype",
  [
    (False, "bfloat16"),
    (True, "float16"),
    # the other pairs in CI's slow step (~30 s each on 2 cores)
    pytest.param(True, "bfloat16", marks=pytest.mark.slow),
    pytest.param(False, "float16", marks=pytest.mark.slow),
  ],
)
def test_16bit_full_fine_tuning_stores_the_weights_in_their_dtype(
  layerwise, dtype
):
  """bfloat16 and float16 full fine-tuning: the trainable weights are stored
  in the dtype when the task is built, and the runner's own step (the
  layer-wise one, or the generic one) returns them in it; its state holds
  no copy of them (nothing parameter-sized), float32 or other."""
  import jax

  from experiments.run import resolution, resolved_run, step

  config = _full(dtype, num_steps=2, num_eval=8, layerwise=layerwise)
  # What is checked is the step's dtypes, not the plan or the loss: a set
  # noise multiplier and no per-example check skip a PLD search and a
  # compilation (~10 s of each member's 15-50 s on 2 cores).
  config.privacy.target_epsilon = None
  config.privacy.noise_multiplier = 1.0
  config.check_per_example = False  # test_..._learns_as_float32 runs it
  run = resolved_run.setup(*resolution.resolve(config))
  state = run.initial_state
  size = sum(x.size for x in jax.tree.leaves(state["params"]))
  params, opt_state, _ = step.make_step(run)(
    state["params"], run.frozen, state["opt_state"], *step.step_inputs(run, 0)
  )
  for tree in (state["params"], params):
    assert {x.dtype.name for x in jax.tree.leaves(tree)} == {dtype}
  assert sum(x.size for x in jax.tree.leaves(opt_state)) < size / 100


@pytest.mark.slow  # 4 runs of 60 steps: ~1.5-2 min on 2 cores
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_16bit_full_fine_tuning_learns_as_float32():
  """Full fine-tuning, 60 DP-ZO steps at step size 3e-3 (epsilon 8, the
  same test noise and batches): the float32 weights reach 0.685 test
  accuracy (zero-shot 0.515). Stored in bfloat16 or float16 (the
  layer-wise step), and in bfloat16 through the generic step, each reaches
  the float32 accuracy within the stated margin of 0.06 (about two
  binomial standard errors on 200 examples; measured 0.645-0.685), and
  beats zero-shot by 0.06 (measured by 0.125 at least). The 200 steps at
  1e-3 this test ran before reached 0.635 in every row, with less room
  above zero-shot, in 3x the steps. This is an end-to-end check, not the
  test of the 16-bit arithmetic: on this tiny model a step that rounds
  ``x + l u`` to bfloat16, or rounds updates to nearest, still learns
  (0.655-0.69 here), so those two are tested where they can fail,
  tests/test_low_precision.py (16-bit points formed in float32 on both
  perturbation paths; updates below half a spacing accumulate only when
  rounded stochastically)."""
  runs = {
    ("float32", True): None,
    ("bfloat16", True): None,
    ("float16", True): None,
    ("bfloat16", False): None,
  }
  for dtype, layerwise in runs:
    config = _full(dtype, num_steps=60, learning_rate=3e-3, layerwise=layerwise)
    runs[dtype, layerwise] = train.train(config, progress=False)
  reference = runs["float32", True]["test_accuracy"]
  zero_shot = runs["float32", True]["history"][0]["test_accuracy"]
  assert reference > zero_shot + 0.06, (reference, zero_shot)
  for (dtype, layerwise), result in runs.items():
    accuracy = result["test_accuracy"]
    assert accuracy >= reference - 0.06, (dtype, layerwise, accuracy)
    assert accuracy > zero_shot + 0.06, (dtype, layerwise, accuracy)
