"""Timing and memory helpers shared by the benchmark scripts."""

from __future__ import annotations

import statistics
import time
from typing import NamedTuple

import jax


def peak_bytes(jitted, *args) -> int:
  """Compiled peak: arguments + outputs + temporaries, less aliased buffers."""
  return compiled_peak(jitted.lower(*args).compile())


def compiled_peak(compiled) -> int:
  """Arguments + outputs + temporaries - aliased of a compiled program."""
  m = compiled.memory_analysis()
  return int(
    m.argument_size_in_bytes
    + m.output_size_in_bytes
    + m.temp_size_in_bytes
    - m.alias_size_in_bytes
  )


def _round_robin_samples(
  fns: dict,
  reps: int,
  min_seconds: float,
  slow_call_seconds: float,
  slow_reps: int,
) -> dict:
  """Seconds of each call of each zero-argument fn, interleaved.

  Two warm-up calls each (compilation included); then at least ``reps``
  rounds, more (up to ``10 reps``) until ``min_seconds`` have passed. Calls
  slower than ``slow_call_seconds`` (DP-SGD on the wide MLP) are sampled
  only ``slow_reps`` times, still interleaved with the others.
  """
  first_call = {}
  for k, f in fns.items():
    jax.block_until_ready(f())
    t0 = time.perf_counter()
    jax.block_until_ready(f())
    first_call[k] = time.perf_counter() - t0
  samples = {k: [] for k in fns}
  start = time.perf_counter()
  r = 0
  while r < reps or (
    time.perf_counter() - start < min_seconds and r < 10 * reps
  ):
    for k, f in fns.items():
      if first_call[k] > slow_call_seconds and len(samples[k]) >= slow_reps:
        continue
      t0 = time.perf_counter()
      jax.block_until_ready(f())
      samples[k].append(time.perf_counter() - t0)
    r += 1
  return samples


def time_round_robin(
  fns: dict,
  reps: int,
  min_seconds: float,
  slow_call_seconds: float = 1.0,
  slow_reps: int = 3,
) -> dict:
  """Median seconds per call of each fn (:func:`_round_robin_samples`)."""
  samples = _round_robin_samples(
    fns, reps, min_seconds, slow_call_seconds, slow_reps
  )
  return {k: statistics.median(v) for k, v in samples.items()}


def min_median_round_robin(
  fns: dict, reps: int, slow_call_seconds: float = 1.0, slow_reps: int = 3
) -> dict:
  """``{name: (min, median)}`` seconds per call over exactly ``reps``
  interleaved rounds after warm-up (:func:`_round_robin_samples`)."""
  samples = _round_robin_samples(fns, reps, 0.0, slow_call_seconds, slow_reps)
  return {k: (min(v), statistics.median(v)) for k, v in samples.items()}


class Paired(NamedTuple):
  """Interleaved times beside a base call (:func:`paired_round_robin`):
  ``{name: (min, median)}`` seconds (the base's over all its calls) and
  ``{name: median over calls of call / the base call just before}``, in
  wall time and in this process's CPU time."""

  times: dict
  ratios: dict
  cpu_times: dict
  cpu_ratios: dict


def _timed(f) -> tuple[float, float]:
  """``(wall, CPU)`` seconds of one call."""
  c0, t0 = time.process_time(), time.perf_counter()
  jax.block_until_ready(f())
  return time.perf_counter() - t0, time.process_time() - c0


def _min_median(samples: dict) -> dict:
  return {k: (min(v), statistics.median(v)) for k, v in samples.items()}


def paired_round_robin(
  base: str,
  fns: dict,
  reps: int,
  slow_call_seconds: float = 1.0,
  slow_reps: int = 3,
) -> Paired:
  """Each fn timed right after a call of ``fns[base]`` (base, a, base, b,
  ..., each round), so that every call has a base call beside it under
  the same machine load.

  Two warm-up calls each (compilation included), then ``reps`` rounds;
  calls slower than ``slow_call_seconds`` (DP-SGD on the wide MLP) are
  timed in the first ``slow_reps`` rounds only.
  """
  first_call = {}
  for k, f in fns.items():
    jax.block_until_ready(f())
    first_call[k] = _timed(f)[0]
  wall, cpu = {k: [] for k in fns}, {k: [] for k in fns}
  ratios = {k: ([], []) for k in fns if k != base}
  for r in range(reps):
    for k, f in fns.items():
      if k == base or (first_call[k] > slow_call_seconds and r >= slow_reps):
        continue
      b, t = _timed(fns[base]), _timed(f)
      for clock, samples in enumerate((wall, cpu)):
        samples[base].append(b[clock])
        samples[k].append(t[clock])
        ratios[k][clock].append(t[clock] / max(b[clock], 1e-9))
  medians = [
    {k: statistics.median(v[clock]) for k, v in ratios.items()} | {base: 1.0}
    for clock in (0, 1)
  ]
  return Paired(_min_median(wall), medians[0], _min_median(cpu), medians[1])
