r"""The README's first run, timed: steps per second of the default job.

    python benchmarks/readme_run.py [--runs 3] [--out benchmarks/results/readme_run.md]

Runs ``python -m experiments.run --config configs/default.py`` (DPZero on the
bundled digits, the README's first command after its install) ``--runs``
times, one after the other, each in a fresh process, exactly as the README
runs it (no work directory: a run with ``--config.workdir`` also writes its
ledger ahead of every step), and reads each run's own report line ``steps: N (T s)`` (the
training loop, after compilation and calibration) and its wall clock. The
results file keeps one row per invocation under ``## History`` (the newest
last, with the commit and the load), so that a regression of the default
run shows as a row against the rows before it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COMMAND = ("-m", "experiments.run", "--config", "configs/default.py")
STEPS = re.compile(r"^steps: (\d+) \(([\d.]+) s\)", re.M)
HISTORY = "## History"
HEADER = (
  "| date (UTC) | commit | runs | steps | train s (min / median) | "
  "steps/s (best / median) | wall s (median) | load before | load after |",
  "|---|---|---|---|---|---|---|---|---|",
)


def one_run() -> tuple[int, float, float]:
  """``(steps, training seconds, wall seconds)`` of one default run."""
  start = time.perf_counter()
  out = subprocess.run(
    [sys.executable, *COMMAND],
    cwd=ROOT,
    capture_output=True,
    text=True,
    check=True,
  ).stdout
  wall = time.perf_counter() - start
  found = STEPS.search(out)
  if found is None:
    raise RuntimeError(f"No 'steps: N (T s)' line in the run's output:\n{out}")
  return int(found.group(1)), float(found.group(2)), wall


def history_row(runs: list[tuple[int, float, float]], before, after) -> str:
  steps = {s for s, _, _ in runs}
  if len(steps) != 1:
    raise RuntimeError(f"The runs trained different step counts: {steps}.")
  (n,) = steps
  train = [t for _, t, _ in runs]
  commit = subprocess.run(
    ["git", "rev-parse", "--short", "HEAD"],
    cwd=ROOT,
    capture_output=True,
    text=True,
  ).stdout.strip()
  date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")
  return (
    f"| {date} | {commit or '?'} | {len(runs)} | {n} | "
    f"{min(train):.2f} / {statistics.median(train):.2f} | "
    f"{n / min(train):.0f} / {n / statistics.median(train):.0f} | "
    f"{statistics.median(w for _, _, w in runs):.1f} | {before} | {after} |"
  )


def write(path: str, row: str) -> None:
  """Appends ``row`` to the file's history, keeping every other line."""
  old = open(path).read().splitlines() if os.path.exists(path) else []
  if HISTORY not in old:
    old = [
      "# The README's first run: steps per second of the default job",
      "",
      __doc__.strip().splitlines()[0],
      "",
      "Command: `python benchmarks/readme_run.py`; machine: 2 CPU cores "
      "unless a row says otherwise. One row per invocation, newest last.",
      "",
      HISTORY,
      "",
      *HEADER,
    ]
  end = old.index(HISTORY) + 1
  while end < len(old) and (old[end].startswith("|") or not old[end]):
    end += 1
  while old[end - 1] == "":
    end -= 1
  lines = old[:end] + [row] + old[end:]
  with open(path, "w") as f:
    f.write("\n".join(lines).rstrip() + "\n")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", type=int, default=3)
  parser.add_argument(
    "--out", default=os.path.join(HERE, "results", "readme_run.md")
  )
  args = parser.parse_args()
  before = tuple(round(x, 2) for x in os.getloadavg())
  runs = []
  for k in range(args.runs):
    runs.append(one_run())
    print(
      f"run {k + 1}: {runs[-1][0]} steps in {runs[-1][1]:.2f} s "
      f"(wall {runs[-1][2]:.1f} s)",
      flush=True,
    )
  after = tuple(round(x, 2) for x in os.getloadavg())
  row = history_row(runs, before, after)
  write(args.out, row)
  print(row)
  print(f"wrote {args.out}")


if __name__ == "__main__":
  main()
