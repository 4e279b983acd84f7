"""Tables of ``benchmarks/peers.py``: one setting, the targets, versions."""

from __future__ import annotations

import os

import jax
import optax

DPZERO = "dpzero (threefry)"
GHOST = "dp_sgd ghost"
TORCH = "torch dpzero (1 thread)"
TORCH_CUDA = "torch dpzero (CUDA)"


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
  DPZERO,
  "dpzero (counter)",
  GHOST,
  "dp_sgd explicit",
  "optax dpsgd",
  "jax_privacy",  # a prefix: the label names its microbatch size
  "torch dpzero",  # a prefix: TORCH or TORCH_CUDA
]


def setting_lines(title, n, param_bytes, times, memory, not_run):
  base_t, base_m = times[DPZERO][1], memory[DPZERO]
  lines = [
    f"## {title} ({n:,} parameters, {mib_str(param_bytes)} MiB)",
    "",
    f"Load after: {load_str()}.",
    "",
    "| implementation | min / median ms | time / dpzero | peak MiB | "
    "peak / dpzero |",
    "|---|---|---|---|---|",
  ]
  present = set(times) | set(not_run)
  if optional("jax_privacy") is None:
    lines.append("| jax_privacy | not installed | | | |")
  for name in [n for o in ORDER for n in sorted(present) if n.startswith(o)]:
    mem = memory.get(name)
    mem_cells = (
      f"{mib_str(mem)} | {mem / base_m:.2f}" if mem is not None else " | "
    )
    if name in times:
      t = times[name]
      lines.append(
        f"| {name} | {ms_str(t)} | {t[1] / base_t:.2f} | {mem_cells} |"
      )
    else:
      lines.append(f"| {name} | not run: {not_run[name]} | | {mem_cells} |")
  return lines + [""]


def target_lines(results):
  lines = [
    "## Targets (medians)",
    "",
    "JAX dpzero >= 3x faster than the torch port at one thread, at no more "
    "working memory (JAX on every core of this machine; the one-core table "
    "below compares core for core). MiniLM: dpzero <= 0.7x the time and "
    "<= 0.3x the memory of ghost-clipping DP-SGD.",
    "",
    "| setting | target | measured | |",
    "|---|---|---|---|",
  ]

  def row(setting, target, value, ok):
    lines.append(
      f"| {setting} | {target} | {value} | {'met' if ok else 'MISSED'} |"
    )

  for setting, (times, memory, is_minilm) in results.items():
    if is_minilm:
      if GHOST in times:
        r = times[DPZERO][1] / times[GHOST][1]
        row(setting, "dpzero / ghost time <= 0.7", f"{r:.2f}", r <= 0.7)
      r = memory[DPZERO] / memory[GHOST]
      row(setting, "dpzero / ghost peak <= 0.3", f"{r:.2f}", r <= 0.3)
    for torch_name in (n for n in (TORCH, TORCH_CUDA) if n in times):
      for name in (n for n in (DPZERO, "dpzero (counter)") if n in times):
        r = times[torch_name][1] / times[name][1]
        row(setting, f"{torch_name} / JAX {name} time >= 3", f"{r:.2f}", r >= 3)
        r = memory[name] / memory[torch_name]
        row(
          setting, f"JAX {name} / {torch_name} memory <= 1", f"{r:.2f}", r <= 1
        )
  return lines + [""]
