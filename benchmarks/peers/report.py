"""Tables of ``benchmarks/peers.py``: one setting, the targets, versions."""

from __future__ import annotations

import os

import floor
import jax
import optax

DEFAULT = "dpzero (default)"  # no direction option: sphere, 'auto'
DPZERO = "dpzero (threefry)"
GHOST = "dp_sgd ghost"
OPACUS = "opacus ghost"  # a prefix: the label names its thread count
FIRST_ORDER = (GHOST, "dp_sgd explicit", "optax dpsgd", "jax_privacy", OPACUS)
TORCH = "torch dpzero (1 thread)"
TORCH_CUDA = "torch dpzero (CUDA)"
FLOOR_CALLS = (floor.FLOOR, floor.FORWARD)  # timed beside, not rows


def optional(name):
  try:
    return __import__(name)
  except ImportError:
    return None


def ms_str(min_median) -> str:
  """Milliseconds, two decimals under 10 ms (a GPU's steps) and one above."""
  digits = 2 if min_median[1] < 1e-2 else 1
  return f"{min_median[0] * 1e3:.{digits}f} / {min_median[1] * 1e3:.{digits}f}"


def mib_str(n) -> str:
  return f"{n / 2**20:.1f}"


def load_str():
  return tuple(round(x, 2) for x in os.getloadavg())


def versions():
  parts = [f"jax {jax.__version__}", f"optax {optax.__version__}"]
  for name in ("jax_privacy", "torch"):
    mod = optional(name)
    parts.append(
      f"{name} {mod.__version__}" if mod else f"{name} not installed"
    )
  return ", ".join(parts)


ORDER = [
  DEFAULT,
  DPZERO,
  "dpzero (counter)",
  GHOST,
  "dp_sgd explicit",
  "optax dpsgd",
  "jax_privacy",  # a prefix: the label names its microbatch size
  OPACUS,
  "torch dpzero",  # a prefix: TORCH or TORCH_CUDA
]


def _floor_cells(paired, name) -> str:
  """``time / floor (CPU)`` of ``name``: the median over its calls of its
  time over the floor call's just before it (empty without a floor)."""
  if floor.FLOOR not in paired.times or name not in paired.ratios:
    return ""
  return f"{paired.ratios[name]:.2f} ({paired.cpu_ratios[name]:.2f})"


def setting_lines(title, n, param_bytes, paired, memory, not_run):
  """One setting's section from its :class:`timing.Paired` times."""
  times = {k: t for k, t in paired.times.items() if k not in FLOOR_CALLS}
  base_t, base_m = times[DEFAULT][1], memory[DEFAULT]
  lines = [
    f"## {title} ({n:,} parameters, {mib_str(param_bytes)} MiB)",
    "",
    f"Load after: {load_str()}.",
    "",
  ]
  if floor.FLOOR in paired.times:
    lines += [floor.floor_text(paired.times), ""]
  lines += [
    "| implementation | min / median ms | time / default | time / floor "
    "(CPU) | peak MiB | peak / default |",
    "|---|---|---|---|---|---|",
  ]
  present = set(times) | set(not_run)
  if optional("jax_privacy") is None:
    lines.append("| jax_privacy | not installed | | | | |")
  for name in [n for o in ORDER for n in sorted(present) if n.startswith(o)]:
    mem = memory.get(name)
    mem_cells = (
      f"{mib_str(mem)} | {mem / base_m:.2f}" if mem is not None else " | "
    )
    if name in times:
      t = times[name]
      lines.append(
        f"| {name} | {ms_str(t)} | {t[1] / base_t:.2f} | "
        f"{_floor_cells(paired, name)} | {mem_cells} |"
      )
    else:
      lines.append(f"| {name} | not run: {not_run[name]} | | | {mem_cells} |")
  return lines + [""]


def fastest_first_order(times):
  """The DP-SGD implementation with the lowest median time, or None."""
  names = [n for n in times if n.startswith(FIRST_ORDER)]
  return min(names, key=lambda n: times[n][1]) if names else None


def target_lines(results):
  lines = [
    "## Targets (medians)",
    "",
    "The default dpzero (no direction option) <= 0.5x the time of the "
    "fastest DP-SGD measured (ours or Opacus' ghost clipping) and <= 0.6x "
    "the peak of the fastest JAX DP-SGD (Opacus' peak is not measured); "
    ">= 2x faster than the torch port at one thread on the MLP; DP-SGD "
    "ghost with exact noise (the default) <= 1.25x its time with float "
    "noise.",
    "",
    "| setting | target | measured | |",
    "|---|---|---|---|",
  ]

  def row(setting, target, value, ok):
    lines.append(
      f"| {setting} | {target} | {value} | {'met' if ok else 'MISSED'} |"
    )

  for setting, (times, memory, _) in results.items():
    if DEFAULT not in times:
      continue
    best = fastest_first_order(times)
    if best is not None:
      r = times[DEFAULT][1] / times[best][1]
      row(setting, f"default / {best} time <= 0.5", f"{r:.2f}", r <= 0.5)
    jax_fo = {n: t for n, t in times.items() if n in memory}
    best_jax = fastest_first_order(jax_fo)
    if best_jax is not None:
      r = memory[DEFAULT] / memory[best_jax]
      row(setting, f"default / {best_jax} peak <= 0.6", f"{r:.2f}", r <= 0.6)
    exact, floating = f"{GHOST} (exact)", f"{GHOST} (float)"
    if exact in times and floating in times:
      r = times[exact][1] / times[floating][1]
      row(
        setting, "ghost exact / ghost float time <= 1.25", f"{r:.2f}", r <= 1.25
      )
    for torch_name in (n for n in (TORCH, TORCH_CUDA) if n in times):
      r = times[torch_name][1] / times[DEFAULT][1]
      row(setting, f"{torch_name} / default time >= 2", f"{r:.2f}", r >= 2)
  return lines + [""]
