"""Compiled peak memory of the runner's step against its physical batch.

A logical batch (the batch the privacy plan accounts, one release per
step) evaluated in physical chunks of ``config.physical_batch_size`` rows
(:mod:`zoprivacy.core.physical_batches`). Each row of the table is the
runner's own step program (:func:`experiments.run.step_program.lowered`,
what a run jits), compiled on abstract arguments; the peak is arguments +
outputs + temporaries - aliased of ``compiled.memory_analysis()``.

* ``tiny OPT``: ``configs/tiny_opt_sst2.py`` on the test fixture (2
  layers, width 64, LoRA, 40 tokens), logical batch 256: DP-ZO with the
  runner's layer-wise step, the generic DP-ZO step, and DP-SGD with
  explicit and ghost clipping (exact noise throughout);
* ``opt-125m``: ``configs/dpzero_table4_5_opt.py`` (DPZero, full
  fine-tuning, the layer-wise step) on opt-125m's shapes, float32, a
  logical batch of 64 sequences of 2,048 tokens: the batch of a language
  model that does not fit at once.

Writes ``benchmarks/results/physical_batch_memory.md``.
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import results_file
import runner_program
from timing import compiled_peak

from configs import tiny_opt_sst2
from experiments import tasks
from experiments.run import resolution, step_program
from zoprivacy.models.opt import OPTConfig

TINY_ROWS = 256
TINY_CHUNKS = (None, 64, 16)
OPT_ROWS, OPT_LENGTH = 64, 2048
OPT_CHUNKS = (None, 16, 4)
TINY_STEPS = {
  "dp_zo layer-wise (the runner's)": {},
  "dp_zo generic": dict(layerwise=False),
  "dp_sgd explicit": dict(
    layerwise=False, estimator="dp_sgd", estimator_kwargs={"clip": 1.0}
  ),
  "dp_sgd ghost": dict(
    layerwise=False,
    estimator="dp_sgd",
    estimator_kwargs={"clip": 1.0, "per_example_clipping": "ghost"},
  ),
}


def tiny_config(size, **fields):
  """``configs/tiny_opt_sst2.py`` (a set multiplier: nothing calibrated)
  in physical chunks of ``size`` rows, with ``fields`` changed."""
  config = tiny_opt_sst2.get_config()
  config.num_train, config.num_eval = 64, 16
  config.privacy.noise_multiplier = 1.0
  config.privacy.target_epsilon = None
  for name, value in dict(fields, physical_batch_size=size).items():
    setattr(config, name, value)  # replaces a block (estimator_kwargs)
  return config


def peak_mib(lowered) -> tuple[float, float]:
  """``(compiled peak in MiB, compile seconds)``."""
  start = time.perf_counter()
  compiled = lowered.compile()
  return compiled_peak(compiled) / 2**20, time.perf_counter() - start


def tiny_rows() -> dict:
  """``{step: {chunk: (peak MiB, compile s)}}`` on the tiny OPT task."""
  task = tasks.get_task(tiny_config(None))
  out = {}
  for name, fields in TINY_STEPS.items():
    out[name] = {
      size: peak_mib(
        step_program.lowered(
          *resolution.resolve(tiny_config(size, **fields)), task, TINY_ROWS
        )
      )
      for size in TINY_CHUNKS
    }
  return out


def opt_rows() -> dict:
  """``{chunk: (peak MiB, compile s)}`` of the opt-125m runner step."""
  return {
    size: peak_mib(
      runner_program.runner_step(
        OPTConfig(),
        "float32",
        OPT_ROWS,
        length=OPT_LENGTH,
        physical_batch_size=size,
      )
    )
    for size in OPT_CHUNKS
  }


def _table(rows: dict, label: str) -> list[str]:
  lines = [
    f"| step | {label} | peak MiB | peak / whole batch | compile s |",
    "|---|---|---|---|---|",
  ]
  for name, by_size in rows.items():
    whole = by_size[None][0]
    for size, (peak, seconds) in by_size.items():
      shown = "whole batch" if size is None else str(size)
      lines.append(
        f"| {name} | {shown} | {peak:.1f} | {peak / whole:.3f} | "
        f"{seconds:.0f} |"
      )
  return lines


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--out", default="benchmarks/results/physical_batch_memory.md"
  )
  parser.add_argument("--skip-opt", action="store_true")
  args = parser.parse_args()
  device = jax.devices()[0]
  lines = [
    "# The runner's step against its physical batch: compiled peak memory",
    "",
    "Command: `python benchmarks/physical_batch_memory.py`  ",
    f"Machine: {platform.machine()}, device {device.device_kind} "
    f"({device.platform}), jax {jax.__version__}.  ",
    "Peak = arguments + outputs + temporaries - aliased "
    "(`memory_analysis()` of the runner's compiled step; nothing is run). "
    "The release is one per logical batch whatever the physical batch.",
    "",
    f"## tiny OPT fixture: logical batch {TINY_ROWS}, 40 tokens",
    "",
    *_table(tiny_rows(), "physical batch"),
  ]
  if not args.skip_opt:
    lines += [
      "",
      f"## opt-125m shapes, full fine-tuning (DPZero, layer-wise): "
      f"logical batch {OPT_ROWS} x {OPT_LENGTH} tokens",
      "",
      *_table({"dpzero layer-wise (the runner's)": opt_rows()}, "physical"),
    ]
  print("\n".join(lines))
  results_file.write_report(args.out, lines)


if __name__ == "__main__":
  main()
