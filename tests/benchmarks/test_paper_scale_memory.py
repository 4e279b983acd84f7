"""``benchmarks/paper_scale_memory.py`` at a tiny stand-in shape, in a
subprocess with 8 simulated CPU devices (tests/paper_scale_check.py):
the fsdp mesh holds an eighth of the parameters per device, the layer-wise
step gathers one layer at a time (its per-device peak stays under the
parameters' size), and the report states what the figures are."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))
from simulated_devices import run_check  # noqa: E402

LAYERWISE = "dp_zo layer-wise (the runner's)"


def _check(*rows):
  return run_check("paper_scale_check.py", timeout=900, args=rows)


def test_forward_on_the_fsdp_mesh_holds_an_eighth_of_the_parameters():
  result = _check("forward")
  one, mesh = (
    result["rows"]["forward"]["one"],
    result["rows"]["forward"]["mesh"],
  )
  param_bytes = 2 * result["params"]  # bfloat16
  assert one["arguments"] >= param_bytes
  assert mesh["arguments"] < 0.15 * one["arguments"], (mesh, one)
  assert mesh["peak"] < one["peak"]
  text = "\n".join(result["report"])
  assert "8-device FSDP mesh" in text and "One device" in text
  assert "a proxy for GPU memory" in text
  assert "accelerator.py" in text


@pytest.mark.slow  # two step compilations on 8 devices: ~60 s
def test_layerwise_step_on_the_mesh_gathers_one_layer_at_a_time():
  result = _check(LAYERWISE)
  one, mesh = (
    result["rows"][LAYERWISE]["one"],
    result["rows"][LAYERWISE]["mesh"],
  )
  param_bytes = 2 * result["params"]
  assert one["peak"] > param_bytes
  # every stack gathered whole before the loop would be param_bytes per
  # device on top of the shards
  assert mesh["peak"] < 0.5 * param_bytes, (mesh, param_bytes)


RUNNER_FULL = "the runner's full fine-tuning"


@pytest.mark.slow  # the runner's step compiled on 1 and 8 devices: ~40 s
def test_the_runners_full_step_is_placed_on_the_fsdp_mesh():
  """experiments.run.step_program lowers the run's step on the mesh of
  config.mesh: an eighth of the weights per device, one layer gathered at
  a time (not the single-device program with sharded inputs)."""
  result = _check(RUNNER_FULL)
  one, mesh = (
    result["rows"][RUNNER_FULL]["one"],
    result["rows"][RUNNER_FULL]["mesh"],
  )
  param_bytes = 2 * result["params"]  # bfloat16, every weight trainable
  assert one["arguments"] >= param_bytes, (one, param_bytes)
  assert mesh["arguments"] < 0.15 * one["arguments"], (mesh, one)
  assert mesh["peak"] < 0.5 * param_bytes, (mesh, param_bytes)
