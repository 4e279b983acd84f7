"""The runner's step of a language model against its physical batch
(compile only): the compiled peak falls with the chunk at a logical batch
over a stated memory cap."""

import pathlib
import sys

import pytest

from experiments import tasks
from experiments.run import resolution, step_program

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "benchmarks"))
import physical_batch_memory as bench  # noqa: E402


@pytest.mark.slow  # compiles three tiny-OPT runner steps: ~35 s
def test_the_runner_step_of_a_language_model_falls_with_the_chunk():
  """``configs/tiny_opt_sst2.py``'s step (DP-ZO, the runner's layer-wise
  step on the tiny OPT fixture, 40 tokens) lowered as a run jits it, at a
  logical batch of 256 rows: over a 16 MiB cap at once, under it in
  chunks of 64 and lower again in chunks of 16 (on the CPU: 41.6, 10.0 and
  3.8 MiB; benchmarks/results/physical_batch_memory.md)."""
  task = tasks.get_task(bench.tiny_config(None))
  peaks = {
    size: bench.peak_mib(
      step_program.lowered(
        *resolution.resolve(bench.tiny_config(size)), task, bench.TINY_ROWS
      )
    )[0]
    for size in (None, 64, 16)
  }
  assert peaks[None] > 16.0 > peaks[64] > peaks[16], peaks
