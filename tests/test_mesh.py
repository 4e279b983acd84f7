"""Sharded steps on 8 simulated CPU devices equal the single-device step.

Meshes ``data=8``, ``fsdp=8`` and ``data=2 x fsdp=4``; estimators dpzero,
dp_zo, pazo_m (with a public batch) and dp_sgd. The check runs in a
subprocess (the device count must be set before JAX starts).

Tolerances. Sharding changes only the order of floating-point reductions.
DP-SGD's update agrees to 1e-6 absolute. A zeroth-order update is
``(f(x + l u) - f(x - l u)) / (2 l)`` times ``u``: a float32 loss rounding
of about 1e-7 is multiplied by ``1 / (2 l) = 500`` at ``l = 1e-3``, so the
update agrees to 2e-4 of its own size (plus 1e-6).
"""

import pytest
from simulated_devices import run_check


# Slow (40-50 s on 2 cores): every mesh shape compiles its own step.
# tests/test_sharding.py keeps a sharded step in the default suite; CI runs
# this one in its slow step, with XLA's default emitters (the equality
# could depend on the generated code).
@pytest.mark.slow
@pytest.mark.xla_defaults
def test_sharded_steps_equal_single_device_on_every_mesh():
  result = run_check("mesh_step_check.py")
  param_bytes = 4 * result["num_params"]
  for name in ("dpzero", "dp_zo", "pazo_m", "dp_sgd"):
    case = result[name]
    moved = case["max_abs_update"]
    assert moved > 1e-3, case  # the step moved the parameters
    tol = 1e-6 if name == "dp_sgd" else 2e-4 * moved + 1e-6
    for mesh in ("data=8", "fsdp=8", "data=2,fsdp=4"):
      assert case[mesh]["max_abs_diff"] <= tol, (name, mesh, case[mesh])
    # FSDP: the parameter shards take about 1/8 of the replicated bytes.
    fsdp = case["fsdp=8"]["param_bytes_per_device"]
    assert fsdp < case["data=8"]["param_bytes_per_device"] / 6, case
    assert "fsdp" in case["fsdp=8"]["kernel_sharding"]
    data = case["data=8"]["collectives"]
    if name == "dp_sgd":
      # First order on the data axis: the gradient sum, parameter-sized.
      assert sum(b for _, _, b in data) >= param_bytes, data
    else:
      # Zeroth order on the data axis: one all-reduce of the q = 1 clipped
      # scalar sum, whatever the model size.
      assert [kind for kind, _, _ in data] == ["all-reduce"], data
      assert sum(b for _, _, b in data) <= 8, data
  # FSDP memory: a dpzero step on a 1.1M-parameter MLP (4.5 MB) at batch
  # 16. Replicated, a device's compiled peak is several times the model;
  # under fsdp=8 it is below the model's own size (the model does not fit
  # one device's share of a budget of param_bytes, the step does), about 8x
  # less than replicated, and three steps train on the sharded parameters.
  mem = result["fsdp_memory"]
  assert mem["fsdp=8"] < mem["param_bytes"] < mem["data=8"], mem
  assert mem["fsdp=8"] <= mem["data=8"] / 6, mem
  assert mem["trained_max_abs_change"] > 1e-3, mem
  assert "'fsdp'" in mem["trained_sharding"], mem
