"""Benchmark: noise calibration time, zoprivacy vs dp_accounting (not a test).

DP-ZO Table 16 setting: T = 75000 steps, Poisson p = 16/1000, delta = 1e-5,
targets eps in {0.5, 1, 4}. Measured side by side in one run:

* ``zoprivacy.privacy.calibrate_noise_multiplier`` (RDP warm start +
  safeguarded log-space secant on the 1e-4 pessimistic PLD; caches cleared
  before every repetition, so every run is cold);
* ``dp_accounting.mechanism_calibration.calibrate_dp_mechanism`` with a
  ``PLDAccountant(value_discretization_interval=1e-4)``, its default bracket
  search from [0, 1] and default tolerance (the slow, tight baseline);
* for reference, dp_accounting calibration at a coarse 1e-3 interval (fast
  but biased upward);
* end to end: the wall time of ``python -m zoprivacy.privacy calibrate``
  in a fresh process per target, beside the cost of starting Python and of
  importing ``zoprivacy.accounting`` and ``dp_accounting`` alone.

Usage::

    python benchmarks/calibration.py [--repeats 3] [--out benchmarks/results/calibration.md]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import resource
import statistics
import subprocess
import sys
import time

import dp_accounting
from dp_accounting import mechanism_calibration
from dp_accounting.pld import pld_privacy_accountant

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from zoprivacy import privacy as zprivacy  # noqa: E402
from zoprivacy.accounting import epsilon as zeps  # noqa: E402
from zoprivacy.accounting import events as zev  # noqa: E402
from zoprivacy.accounting import search_start as zstart  # noqa: E402
from zoprivacy.privacy import calibration as zcal  # noqa: E402
from zoprivacy.privacy.calibration import noise_search as zsearch  # noqa: E402

P = 16 / 1000
T = 75000
DELTA = 1e-5
TARGETS = (0.5, 1.0, 4.0)


def _clear_caches():
  zsearch._fine_epsilon.cache_clear()  # pylint: disable=protected-access
  zstart.rdp_warm_start.cache_clear()
  zeps._lru_pld.cache_clear()  # pylint: disable=protected-access


def fine_epsilon(sigma: float) -> float:
  event = zev.poisson_gaussian_event(
    noise_multiplier=sigma, sampling_probability=P, num_steps=T
  )
  return zeps.pld_epsilon(
    event, delta=DELTA, value_discretization_interval=1e-4
  )


def ours(target: float):
  _clear_caches()
  t0 = time.perf_counter()
  res = zprivacy.calibrate_noise_multiplier(
    target_epsilon=target, delta=DELTA, sampling_probability=P, num_steps=T
  )
  return time.perf_counter() - t0, res


def baseline(target: float, interval: float):
  def make_event(sigma):
    return dp_accounting.SelfComposedDpEvent(
      dp_accounting.PoissonSampledDpEvent(
        P, dp_accounting.GaussianDpEvent(sigma)
      ),
      T,
    )

  t0 = time.perf_counter()
  sigma = mechanism_calibration.calibrate_dp_mechanism(
    lambda: pld_privacy_accountant.PLDAccountant(
      value_discretization_interval=interval
    ),
    make_event,
    target,
    DELTA,
  )
  return time.perf_counter() - t0, sigma


def wall_seconds(argv: list[str]) -> tuple[float, float]:
  """Wall and CPU seconds (user + system) of one fresh process running
  ``argv`` (the calibration cache variable removed: every run searches
  anew)."""
  env = {k: v for k, v in os.environ.items() if k != zcal.CACHE_VAR}
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  t0 = time.perf_counter()
  subprocess.run(argv, env=env, check=True, capture_output=True)
  wall = time.perf_counter() - t0
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
  return wall, cpu


def _commands() -> dict[str, list[str]]:
  py = sys.executable
  commands = {
    "`python -c pass`": [py, "-c", "pass"],
    "`import zoprivacy.accounting`": [py, "-c", "import zoprivacy.accounting"],
    IMPORT: [py, "-c", "import dp_accounting"],
  }
  for target in TARGETS:
    label = (
      f"`python -m zoprivacy.privacy calibrate --epsilon {target:g} "
      f"--delta 1e-5 --sampling-probability 0.016 --steps {T}`"
    )
    commands[label] = [py, "-m", "zoprivacy.privacy", "calibrate"]
    commands[label] += ["--epsilon", str(target), "--delta", str(DELTA)]
    commands[label] += ["--sampling-probability", str(P), "--steps", str(T)]
  return commands


IMPORT = "`import dp_accounting`"
CLI_OVER_IMPORT = 0.5  # target: the CLI within 0.5 s of the import alone


def end_to_end_lines(repeats: int) -> list[str]:
  """The CLI's wall time per target, beside what importing costs alone:
  the commands take turns, ``repeats`` rounds."""
  load = tuple(round(x, 2) for x in os.getloadavg())
  commands = _commands()
  times = {label: [] for label in commands}
  for _ in range(repeats):
    for label, argv in commands.items():
      times[label].append(wall_seconds(argv))
  wall = {k: statistics.median(w for w, _ in t) for k, t in times.items()}
  cpu_min = {k: min(c for _, c in t) for k, t in times.items()}
  lines = [
    "## End to end: the command line, from a fresh process",
    "",
    f"Seconds, median (min) of {repeats} processes each, the commands "
    "taking turns: wall clock, and CPU (user + system of the process, "
    "which other jobs and a cold file cache inflate less). Target: each "
    f"CLI calibration at most {CLI_OVER_IMPORT} s over `import "
    "dp_accounting`, on the CPU minima (the medians move with the file "
    "cache: this machine keeps little of it, and the import reads SciPy "
    f"from disk). Load average before: {load}.",
    "",
    "| command | wall s | CPU s | CPU min over the import's (s) | target |",
    "|---|---|---|---|---|",
  ]
  for label, t in times.items():
    over = met = ""
    if label.startswith("`python -m"):
      extra = cpu_min[label] - cpu_min[IMPORT]
      over = f"{extra:+.2f}"
      met = "met" if extra <= CLI_OVER_IMPORT else "MISSED"
    lines.append(
      f"| {label} | {wall[label]:.2f} ({min(w for w, _ in t):.2f}) | "
      f"{statistics.median(c for _, c in t):.2f} ({cpu_min[label]:.2f}) | "
      f"{over} | {met} |"
    )
  return lines + [
    "",
    f"Importing dp_accounting (with the SciPy modules it loads: signal, "
    f"stats, optimize) takes {wall[IMPORT]:.2f} s (wall) of each command here; "
    "the rest is the search (table above) and the report (the PLD epsilon "
    "by direction and the RDP epsilon).",
    "",
  ]


def machine_note() -> str:
  cpu = "unknown CPU"
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("model name"):
          cpu = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
  from importlib import metadata

  return (
    f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
    f"dp-accounting {metadata.version('dp-accounting')}, numpy "
    f"{metadata.version('numpy')}, scipy {metadata.version('scipy')}; "
    f"load average at start {tuple(round(x, 2) for x in load)}"
  )


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument(
    "--out", default=str(REPO / "benchmarks" / "results" / "calibration.md")
  )
  args = parser.parse_args(argv)
  note = machine_note()
  print(note)
  rows = []
  for target in TARGETS:
    our_runs = [ours(target) for _ in range(args.repeats)]
    res = our_runs[-1][1]
    base_runs = [baseline(target, 1e-4) for _ in range(args.repeats)]
    base_sigma = base_runs[-1][1]
    base_eps = fine_epsilon(base_sigma)
    coarse_t, coarse_sigma = baseline(target, 1e-3)
    row = dict(
      target=target,
      our_t=statistics.median(t for t, _ in our_runs),
      our_t_max=max(t for t, _ in our_runs),
      our_sigma=res.noise_multiplier,
      our_eps=res.epsilon,
      our_lower=res.lower_bound,
      our_evals=res.num_pld_evaluations,
      base_t=statistics.median(t for t, _ in base_runs),
      base_t_max=max(t for t, _ in base_runs),
      base_sigma=base_sigma,
      base_eps=base_eps,
      coarse_t=coarse_t,
      coarse_sigma=coarse_sigma,
      coarse_eps=fine_epsilon(coarse_sigma),
    )
    rows.append(row)
    print(
      f"eps={target}: ours {row['our_t']:.3f}s sigma={res.noise_multiplier:.4f} "
      f"(eps {res.epsilon:.5f}, {res.num_pld_evaluations} PLD evals) | "
      f"dp_accounting 1e-4 {row['base_t']:.3f}s sigma={base_sigma:.4f} "
      f"(eps {base_eps:.5f}) | 1e-3 {coarse_t:.3f}s sigma={coarse_sigma:.4f}",
      flush=True,
    )

  lines = [
    "# Noise calibration benchmark",
    "",
    "Command:",
    "",
    "```",
    f"python benchmarks/calibration.py --repeats {args.repeats}",
    "```",
    "",
    f"Machine: {note}.",
    "",
    f"Setting: DP-ZO Table 16, Poisson p = 16/1000, T = {T}, delta = 1e-5, "
    "Gaussian, add/remove (max of both directions). All epsilons in the "
    "table are the pessimistic PLD epsilon at value_discretization_interval "
    "1e-4, recomputed for the returned multiplier. Times are the median "
    f"(and max) of {args.repeats} cold runs (zoprivacy caches cleared before "
    "each run).",
    "",
    "| target eps | zoprivacy time (s) | zoprivacy sigma | its eps (1e-4) | "
    "PLD evals | dp_accounting 1e-4 time (s) | dp_accounting sigma | its eps "
    "(1e-4) | sigma ratio | dp_accounting 1e-3 time (s) | 1e-3 sigma | its "
    "eps (1e-4) |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for r in rows:
    lines.append(
      f"| {r['target']} | {r['our_t']:.3f} (max {r['our_t_max']:.3f}) | "
      f"{r['our_sigma']:.4f} | {r['our_eps']:.5f} | {r['our_evals']} | "
      f"{r['base_t']:.3f} (max {r['base_t_max']:.3f}) | "
      f"{r['base_sigma']:.4f} | {r['base_eps']:.5f} | "
      f"{r['our_sigma'] / r['base_sigma']:.5f} | {r['coarse_t']:.3f} | "
      f"{r['coarse_sigma']:.4f} | {r['coarse_eps']:.5f} |"
    )
  lines += [
    "",
    "sigma ratio = zoprivacy sigma / dp_accounting (1e-4) sigma. zoprivacy "
    "returns the smallest evaluated multiplier whose fine pessimistic PLD "
    "epsilon is <= target, with an evaluated multiplier at most 0.2% below "
    "it that is over the target (so it is within 0.2% of the exact root).",
    "dp_accounting's brentq returns a point within tol=1e-6 of the root "
    "with epsilon <= target.",
    "The 1e-3 columns show why a coarse interval is not a shortcut: its "
    "multiplier is biased upward (too much noise).",
    "",
    "Note: an earlier measurement gave 12-28 s per target for the "
    "dp_accounting 1e-4 baseline on a machine of this kind; that was not "
    "reproduced in this run (times above; the machine was shared with "
    "other jobs, see the load average). Most of the baseline's time goes "
    "to its bracket search from [0, 1], where small multipliers give large "
    "epsilons and expensive PLDs; zoprivacy starts from the RDP-calibrated "
    "multiplier (at a few Renyi orders, a few milliseconds each) instead "
    "and needs 3-4 fine PLD evaluations.",
    "",
  ]
  lines += end_to_end_lines(args.repeats)
  out = pathlib.Path(args.out)
  out.parent.mkdir(parents=True, exist_ok=True)
  out.write_text("\n".join(lines))
  print(f"wrote {out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
