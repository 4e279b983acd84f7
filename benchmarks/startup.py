r"""Start-up of the default run: where the seconds before training go.

    python benchmarks/startup.py [--repeats 3] [--version LABEL DIR ...]
        [--out benchmarks/results/startup.md] [-- runner overrides...]

Runs ``python -m experiments.run --config configs/default.py
--config.num_steps=1`` (plus the overrides) from each ``--version``'s
checkout (default: this one), in fresh processes: per repeat and version
in turn (so that they share the machine's load), a *first run* with an
empty cache folder (``XDG_CACHE_HOME`` pointing at a new temporary
directory: no compiled program, no calibration stored) and then a *second
run* with the same folder. Each run is timed from outside (wall clock from
the spawn to the exit, and the child's CPU time) and from inside, by this
script run as the child (``--child``): it runs the runner in-process and
splits its wall time into exclusive parts:

* imports: the outermost ``import`` statements and ``import_module`` calls;
* calibration: ``zoprivacy.privacy.calibrate`` (the noise multiplier's
  search and the plan's PLD);
* compilation: JAX's tracing, lowering and XLA compilation (or loading from
  the persistent cache), from JAX's own monitoring events, per program;
* steps: the jitted step's calls (the first one's compilation excluded);
* other: the rest (config checks, data, model and state, evaluation,
  checkpoint-free report; the interpreter's own start).

When the progress bar would appear on a terminal (``bar shown``: the
command's bar opening, or, for a revision without one, the loop's bar after
the first step) and when the first step starts are recorded too, with the
process's CPU seconds until then (``CPU s to it``: what the start-up
takes on a quiet machine, where the runner has a core to itself).
``--steps 4000`` times the default run itself (its first step's start is
its start-up). The results file gets one section per version label (rerun
with the same label to replace it), with the machine's load average
before and after.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RUN = ("-m", "experiments.run", "--config", "configs/default.py")
PARTS = ("imports", "calibration", "compilation", "steps", "other")


# ----------------------------------------------------------------- child


class _Clock:
  """Exclusive wall time per part: a part's time less the nested parts'."""

  def __init__(self):
    self.totals = dict.fromkeys(PARTS, 0.0)
    self.stack = []  # [part, start, nested seconds]
    self.programs = {}  # program name -> compile seconds
    self.marks = {}
    self.cpu_marks = {}  # the process's CPU seconds at each mark

  @contextlib.contextmanager
  def part(self, name):
    self.stack.append([name, time.perf_counter(), 0.0])
    try:
      yield
    finally:
      name, start, nested = self.stack.pop()
      elapsed = time.perf_counter() - start
      self.totals[name] += elapsed - nested
      if self.stack:
        self.stack[-1][2] += elapsed

  def nested_event(self, seconds: float) -> None:
    """A compilation JAX reports once it is over, inside the current part."""
    self.totals["compilation"] += seconds
    if self.stack:
      self.stack[-1][2] += seconds

  def mark(self, name: str) -> None:
    self.marks.setdefault(name, time.time())
    self.cpu_marks.setdefault(name, time.process_time())


def _wrap(clock, owner, attribute, part):
  original = getattr(owner, attribute)

  def wrapper(*args, **kwargs):
    with clock.part(part):
      return original(*args, **kwargs)

  setattr(owner, attribute, wrapper)


def _timed(clock, importer):
  """``importer`` (``__import__`` or ``import_module``) timed as imports
  when outermost, the hooks of :func:`_after_import` run after it."""

  def timed(name, *args, **kwargs):
    if clock.stack and clock.stack[-1][0] == "imports":
      return importer(name, *args, **kwargs)
    with clock.part("imports"):
      module = importer(name, *args, **kwargs)
    _after_import(clock)
    return module

  return timed


def _install(clock) -> None:
  """Import, calibration, compilation and step timers."""
  builtins.__import__ = _timed(clock, builtins.__import__)
  importlib.import_module = _timed(clock, importlib.import_module)


_HOOKED = set()
COMPILE_EVENTS = (
  "/jax/core/compile/jaxpr_trace_duration",
  "/jax/core/compile/jaxpr_to_mlir_module_duration",
  "/jax/core/compile/backend_compile_duration",
)


def _after_import(clock) -> None:
  """Hooks what has just become importable."""
  modules = sys.modules
  if "jax" not in _HOOKED and "jax.monitoring" in modules:
    _HOOKED.add("jax")

    def listener(event, seconds, **kwargs):
      if event in COMPILE_EVENTS:
        name = kwargs.get("fun_name", "?")
        clock.programs[name] = clock.programs.get(name, 0.0) + seconds
        clock.nested_event(seconds)

    modules["jax.monitoring"].register_event_duration_secs_listener(listener)
  # The calibration, and its name in earlier versions (timed beside it).
  for module, name, package in (
    ("zoprivacy.privacy.calibration", "calibrate", "zoprivacy.privacy"),
    (
      "zoprivacy.accounting.plan_calibration",
      "calibrate_plan",
      "zoprivacy.accounting",
    ),
  ):
    found = modules.get(module)
    if "calibration" not in _HOOKED and hasattr(found, name):
      _HOOKED.add("calibration")
      _wrap(clock, found, name, "calibration")
      modules[package].__dict__[name] = getattr(found, name)
  loop = modules.get("experiments.run.loop")
  if "steps" not in _HOOKED and hasattr(loop, "Loop"):
    _HOOKED.add("steps")
    original = loop.Loop._one_step

    def one_step(self, step, t, last):
      clock.mark("first step")
      with clock.part("steps"):
        out = original(self, step, t, last)
      clock.mark("first step done")
      return out

    loop.Loop._one_step = one_step
  bar = modules.get("experiments.run.progress")
  if "bar" not in _HOOKED and hasattr(bar, "start"):
    _HOOKED.add("bar")
    start = bar.start

    def bar_start(*args, **kwargs):
      clock.mark("bar")
      return start(*args, **kwargs)

    bar.start = bar_start


def _child(argv, out_path: str) -> None:
  start = float(os.environ["STARTUP_SPAWNED"])
  clock = _Clock()
  _install(clock)
  first_write = {}
  for stream in (sys.stdout, sys.stderr):
    write = stream.write

    def tee(text, write=write):
      if text.strip():
        first_write.setdefault("t", time.time())
      return write(text)

    stream.write = tee
  clock.stack.append(["other", time.perf_counter(), 0.0])
  sys.argv = ["experiments.run", *argv]
  t0 = time.perf_counter()
  from experiments.run import cli  # pylint: disable=g-import-not-at-top

  code = cli.main()
  wall = time.perf_counter() - t0
  name, begun, nested = clock.stack.pop()
  clock.totals[name] += time.perf_counter() - begun - nested
  cpu = time.process_time()
  result = {
    "code": code,
    "inside": wall,
    "cpu": cpu,
    "parts": clock.totals,
    "programs": clock.programs,
    "marks": {k: v - start for k, v in clock.marks.items()},
    "first_output": first_write.get("t", time.time()) - start,
    "first_step": clock.marks.get("first step", time.time()) - start,
    "first_step_cpu": clock.cpu_marks.get("first step", cpu),
    # On a terminal: the command's bar, or (before it had one) the loop's,
    # opened after the first step.
    "bar": clock.marks.get("bar", clock.marks.get("first step done", 0.0))
    - start,
  }
  with open(out_path, "w") as f:
    json.dump(result, f)


CALIBRATION = """
import json, sys, time
import jax, dp_accounting, scipy.optimize, scipy.signal, scipy.stats
import zoprivacy
try:  # the imports, untimed (the calibration's module, and its earlier one)
  from zoprivacy.privacy import calibration
except ImportError:
  from zoprivacy.accounting import plan_calibration
from zoprivacy.estimators import dpzero
w, c = time.perf_counter(), time.process_time()
est, plan = zoprivacy.private(zoprivacy.dpzero, target_epsilon=2.0,
  delta=1e-5, num_steps=4000, expected_batch_size=64, dataset_size=1437,
  clip=1.0, smoothing=1e-3)
print(json.dumps([time.perf_counter() - w, time.process_time() - c,
  plan.noise_multiplier, plan.epsilon(4000)]))
"""


def calibration_run(code_dir: str) -> list[float]:
  """``zoprivacy.private(dpzero, ...)`` for the default run (T = 4,000),
  the first call in a fresh process, no calibration cache: ``[wall, CPU,
  multiplier, epsilon]`` (imports excluded)."""
  env = dict(os.environ, PYTHONPATH=code_dir, JAX_PLATFORMS="cpu")
  env.pop("ZOPRIVACY_CALIBRATION_CACHE_DIR", None)
  cmd = [sys.executable, "-c", CALIBRATION]
  out = subprocess.check_output(cmd, cwd=code_dir, env=env, text=True)
  return json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------- parent


def one_run(code_dir: str, cache: str, extra, steps: int = 1) -> dict:
  """One run in a fresh process with ``cache`` as its cache folder."""
  with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
    out = f.name
  env = dict(os.environ, XDG_CACHE_HOME=cache, PYTHONPATH=code_dir)
  for key in ("JAX_COMPILATION_CACHE_DIR", "ZOPRIVACY_CALIBRATION_CACHE_DIR"):
    env.pop(key, None)
  spawned = time.time()
  env["STARTUP_SPAWNED"] = repr(spawned)
  cmd = [sys.executable, os.path.abspath(__file__), "--child", out, "--"]
  cmd += [*RUN[2:], f"--config.num_steps={steps}", *extra]
  proc = subprocess.run(cmd, cwd=code_dir, env=env, capture_output=True)
  wall = time.time() - spawned
  if proc.returncode:
    raise RuntimeError(proc.stderr.decode()[-3000:])
  with open(out) as f:
    result = json.load(f)
  os.unlink(out)
  result["wall"] = wall
  # The interpreter's start, before the child's first line: other.
  result["parts"]["other"] += wall - result["inside"]
  return result


def _cell(values, digits=1) -> str:
  return f"{min(values):.{digits}f} / {statistics.median(values):.{digits}f}"


def table(runs: dict[str, list[dict]]) -> list[str]:
  head = (
    "| run | wall s | CPU s | "
    + " | ".join(f"{p} s" for p in PARTS)
    + " | bar shown s | first step s | CPU s to it |"
  )
  lines = [head, "|" + "---|" * (len(PARTS) + 6)]
  for kind, results in runs.items():
    cells = [
      _cell([r["wall"] for r in results]),
      _cell([r["cpu"] for r in results]),
      *(_cell([r["parts"][p] for r in results]) for p in PARTS),
      _cell([r["bar"] for r in results], 2),
      _cell([r["first_step"] for r in results]),
      _cell([r["first_step_cpu"] for r in results]),
    ]
    lines.append(f"| {kind} | " + " | ".join(cells) + " |")
  return lines


def programs(runs: dict[str, list[dict]]) -> list[str]:
  """Compile seconds per program (median over repeats), largest first."""
  lines = []
  for kind, results in runs.items():
    names = {n for r in results for n in r["programs"]}
    medians = {
      n: statistics.median(r["programs"].get(n, 0.0) for r in results)
      for n in names
    }
    top = sorted(medians.items(), key=lambda kv: -kv[1])
    shown = ", ".join(f"`{n}` {s:.2f}" for n, s in top[:8])
    rest = sum(s for _, s in top[8:])
    lines.append(
      f"- {kind}: {len(names)} programs; {shown}"
      + (f"; {len(top) - 8} others {rest:.2f} s" if len(top) > 8 else "")
    )
  return lines


def _repeat(versions, args, k, runs) -> None:
  """One repeat: each version's first run (empty cache folder), then its
  second run (the same folder), versions taking turns."""
  for label, code in versions:
    with tempfile.TemporaryDirectory(prefix="startup-cache-") as cache:
      for kind in ("first run", "second run"):
        r = one_run(code, cache, args.extra, args.steps)
        runs[label][kind].append(r)
        print(
          f"repeat {k + 1} {label}, {kind}: wall {r['wall']:.1f} s, "
          + ", ".join(f"{p} {r['parts'][p]:.1f}" for p in PARTS),
          flush=True,
        )
    runs[label]["calibration"].append(calibration_run(code))


def main() -> None:
  if len(sys.argv) > 2 and sys.argv[1] == "--child":
    sys.path.insert(0, os.getcwd())
    _child(sys.argv[4:], sys.argv[2])
    return
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--steps", type=int, default=1)
  parser.add_argument(
    "--version",
    nargs=2,
    action="append",
    metavar=("LABEL", "DIR"),
    help="a label and a checkout to time (repeatable; default: this one)",
  )
  parser.add_argument(
    "--out", default=os.path.join(HERE, "results", "startup.md")
  )
  parser.add_argument("extra", nargs="*", help="runner overrides")
  args = parser.parse_args()
  versions = args.version or [("this revision", ROOT)]
  before = tuple(round(x, 2) for x in os.getloadavg())
  runs = {
    label: {"first run": [], "second run": [], "calibration": []}
    for label, _ in versions
  }
  for k in range(args.repeats):
    _repeat(versions, args, k, runs)
  after = tuple(round(x, 2) for x in os.getloadavg())
  head = (
    f"{args.repeats} repeats, min / median, the versions taking turns; "
    f"load average before {before}, after {after}."
  )
  for label, _ in versions:
    calibrations = runs[label].pop("calibration")
    wall, cpu, sigma, eps = zip(*calibrations)
    section = [
      f"## {label}",
      "",
      head,
      "",
      *table(runs[label]),
      "",
      "Compilation per program:",
      "",
      *programs(runs[label]),
      "",
      "Calibration of the default run (T = 4,000), "
      "`zoprivacy.private(zoprivacy.dpzero, ...)`, the first call in a "
      f"fresh process, no cache: wall {_cell(wall, 2)} s, CPU "
      f"{_cell(cpu, 2)} s (min / median); multiplier {sigma[0]!r}, "
      f"epsilon {eps[0]!r}.",
      "",
    ]
    print("\n".join(section))
    _write(args.out, label, section)


def _write(path: str, label: str, section: list[str]) -> None:
  """Replaces the ``## label`` section of ``path`` (or appends it)."""
  text = open(path).read() if os.path.exists(path) else ""
  if not text:
    text = "# Start-up of the default run\n\n" + __doc__.strip() + "\n"
  lines = text.rstrip("\n").split("\n")
  heading = f"## {label}"
  if heading in lines:
    start = lines.index(heading)
    end = next(
      (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
      len(lines),
    )
    lines[start:end] = section
  else:
    lines += [""] + section
  with open(path, "w") as f:
    f.write("\n".join(lines).rstrip() + "\n")


if __name__ == "__main__":
  main()
