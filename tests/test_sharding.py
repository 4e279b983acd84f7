"""dpzero on 8 simulated CPU devices equals the single-device step, with
floating-point noise and with exact discrete noise.

The check runs in a subprocess because the simulated device count must be
set before JAX initialises (this test process has already started JAX).
"""

from simulated_devices import run_check


def test_sharded_dpzero_step_matches_single_device():
  result = run_check("sharded_step_check.py", timeout=300)
  assert result["num_params"] > 1000
  for case, mechanism, reduced in (
    (result, "gaussian", "f32"),
    (result["exact"], "discrete_gaussian", "s32"),
    # physical chunks of 16 rows (2 per device): still one all-reduce
    (result["chunked"], "discrete_gaussian", "s32"),
  ):
    assert case["mechanism"] == mechanism, case
    assert case["max_abs_update"] > 1e-3, case  # the step moved the params
    # Same state (same public direction key and secret noise key) and, for
    # exact noise, the same integer noise => same direction and noise; only
    # the order of the batch reduction differs across devices. Tolerance:
    # 1e-6 absolute on parameters.
    assert case["max_abs_diff"] <= 1e-6, case
    # The only cross-device traffic is the all-reduce of the q = 1 clipped
    # sum (float, or the exact integer sum of the quantized values): a
    # scalar, never a parameter-sized tensor.
    assert case["collectives"], case
    assert all(kind == "all-reduce" for kind, _ in case["collectives"]), case
    assert all(shape.startswith(reduced) for _, shape in case["collectives"]), (
      case
    )
    assert max(case["collective_sizes"]) == 4, case  # bytes: one 32-bit value
