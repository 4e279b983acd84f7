"""Run as a subprocess with 8 simulated CPU devices (see
tests/benchmarks/test_paper_scale_memory.py).

``paper_scale_check.py ROW [ROW ...]``: each row of
``benchmarks/paper_scale_memory.py`` compiled on a 12-layer OPT of width
128 over a 512-token vocabulary (2.45M parameters, 97% of them in
the layers, as at paper scale), bfloat16, batch 16 x 16, on one device and
on the 8-device fsdp mesh. Prints one JSON line: ``{row: {"one": measure, "mesh":
measure}}``, the parameter count and the report's lines.
"""

import json
import os
import pathlib
import sys

os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
)
os.environ["JAX_PLATFORMS"] = "cpu"
sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "benchmarks"))

import jax  # noqa: E402
import paper_scale_memory as psm  # noqa: E402
import paper_scale_report  # noqa: E402


def main():
  assert jax.device_count() == 8, jax.devices()
  rows = tuple(sys.argv[1:])
  config = psm.opt_shape(128, 12, 4, vocab=512, positions=64)
  one = psm.Setting("single", "opt-2.7b", "bfloat16", 16, 16, 1, rows)
  mesh = one._replace(section="mesh", devices=8)
  results = {
    s: {r: psm.measure(r, s, config) for r in rows} for s in (one, mesh)
  }
  count = psm.param_count(config)
  lines = paper_scale_report.report(results, {"opt-2.7b": count}, 1.0, True)
  out = {r: {"one": results[one][r], "mesh": results[mesh][r]} for r in rows}
  print(json.dumps({"rows": out, "params": count, "report": lines}))


if __name__ == "__main__":
  main()
