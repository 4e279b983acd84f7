"""The Markdown report of ``paper_scale_memory.py`` (per-device compiled
peaks at the DP-ZO paper's model sizes)."""

from __future__ import annotations

import os
import platform
import resource
import sys

import jax

GIB = 2**30
FIT_BYTES = 78 * GIB  # what an 80 GB device leaves a program (module note)
# DP-ZO (Tang et al. 2024) Table 5: OPT-2.7B, full precision, no gradient
# checkpointing, batch 2 (2 accumulation steps), one A100 80GB; GB. DP-ZO
# full, DP-ZO LoRA, DP-SGD full with ghost clipping, DP-SGD full.
PAPER_TABLE5 = {
  128: ("11.6", "10.3", "32.9", "51.3"),
  512: ("11.7", "11.1", "39.6", "51.4"),
  2048: ("15.6", "15.6", "OOM", "OOM"),
}


# What the stored papers say of full-parameter fine-tuning at these sizes
# (no measured figure: MeZO's memory table is not among them): MeZO's
# abstract (float16) and DP-ZO's Section 5 (OPT-66B on one A100).
PAPER_FULL = {
  ("opt-30b", "float16"): "MeZO: fits one A100 80GB (abstract)",
  ("opt-66b", "float16"): "DP-ZO: does not fit one A100 (Sec. 5)",
}


UNIT = {"GiB": GIB, "MiB": 2**20}  # --tiny's shapes are reported in MiB


LABELS = {"dp_zo layer-wise (the runner's)": "dp_zo layer-wise"}


def _label(row: str) -> str:
  return LABELS.get(row, row)


def _cell(r: dict, unit: str) -> str:
  if "error" in r:
    if "2^32" in r["error"]:
      return "refused: a leaf of 2^32+ elements (notes)"
    if "aborted" in r["error"]:
      return "XLA:CPU aborts compiling (notes)"
    return f"not compiled: {r['error']}"
  text = f"{r['peak'] / UNIT[unit]:.2f}"
  return text if r["peak"] <= FIT_BYTES else f"{text} (over)"


def _fits(rows: dict) -> str:
  fit = [n for n, r in rows.items() if "peak" in r and r["peak"] <= FIT_BYTES]
  if len(fit) == len(rows):
    return "all"
  if not fit:
    return "none"
  rest = [_label(n) for n in rows if n not in fit]
  return "all but " + ", ".join(rest)


def _seconds(rows: dict) -> str:
  return f"{sum(r.get('compile_s', 0.0) for r in rows.values()):.0f}"


def _weights(setting, count: int, unit: str) -> str:
  """Stored weights per device."""
  size = 4 if setting.dtype == "float32" else 2
  return f"{count * size / setting.devices / UNIT[unit]:.2f}"


def table5_lines(results: dict, counts: dict, unit: str) -> list[str]:
  chosen = {s: r for s, r in results.items() if s.section == "table5"}
  names = list(next(iter(chosen)).rows)
  lines = [
    "## DP-ZO Table 5's setting: OPT-2.7B on one device, batch 2",
    "",
    "The paper's columns are its measured GB on one A100 80GB (full "
    "precision, no gradient checkpointing, batch 2 with 2 accumulation "
    "steps): DP-ZO full fine-tuning, DP-ZO LoRA, DP-SGD full with ghost "
    "clipping, DP-SGD full.",
    "",
    f"| precision | sequence | weights {unit} | "
    + " | ".join(map(_label, names))
    + " | "
    "fits 80 GB | paper: DP-ZO full / LoRA / DP-SGD ghost / full | "
    "compile s |",
    "|---|---|---|" + "---|" * len(names) + "---|---|---|",
  ]
  for setting, rows in chosen.items():
    paper = PAPER_TABLE5.get(setting.length)
    paper = " / ".join(paper) if paper and setting.dtype == "float32" else ""
    cells = [
      setting.dtype,
      str(setting.length),
      _weights(setting, counts[setting.model], unit),
      *(_cell(rows[n], unit) for n in names),
      _fits(rows),
      paper,
      _seconds(rows),
    ]
    lines.append("| " + " | ".join(cells) + " |")
  return lines + [""]


def _both(r: dict, unit: str) -> str:
  """A cell in ``unit`` and, for GiB, in GB (10^9 bytes) beside it (None:
  not compiled)."""
  if r is None:
    return "not compiled in this run"
  cell = _cell(r, unit)
  if "peak" not in r or unit != "GiB":
    return cell
  return (
    cell.replace(" (over)", "")
    + f" / {r['peak'] / 1e9:.2f}"
    + (" (over)" if r["peak"] > FIT_BYTES else "")
  )


def _ratios(narrow: dict, f32: dict) -> str:
  """``narrow``'s peaks over float32's, per placement (``{devices:
  result}``)."""
  out = []
  for devices in sorted(narrow):
    a, b = narrow[devices], f32.get(devices, {})
    ok = "peak" in a and "peak" in b
    out.append(f"{a['peak'] / b['peak']:.3f}" if ok else "-")
  return ", ".join(out)


def full_lines(results: dict, counts: dict, unit: str) -> list[str]:
  """The ``full`` section: one row per model and dtype, one device beside
  the fsdp mesh's per-device peak."""
  chosen = {s: r for s, r in results.items() if s.section == "full"}
  if not chosen:
    return []
  first = next(iter(chosen))
  cells = {}
  for s, rows in chosen.items():
    cells.setdefault((s.model, s.dtype), {})[s.devices] = [*rows.values()][0]
  per = "GiB / GB" if unit == "GiB" else unit
  lines = [
    f"## The runner's full fine-tuning step: batch 2 per device x "
    f"{first.length} tokens",
    "",
    "The step a run of `configs/dpzero_table4_5_opt.py` on SQuAD jits "
    "(`experiments.run.step_program.lowered` on abstract weights: the "
    "layer-wise DP step, every weight trained and stored in the dtype, "
    "16-bit leaves perturbed in float32 one layer at a time and updated by "
    "stochastic rounding, exact noise), placed as the runner places a run "
    "(`config.mesh`). Its loss is over every one of the "
    f"{first.length - 1} predicted positions (the head by vocabulary "
    "chunks): the positions whose logits MeZO's and DP-ZO's programs "
    "(Hugging Face `OPTForCausalLM`) compute, before their loss masks all "
    "but the answer; those programs hold the whole positions x 50,272 "
    "logits at once. One device: batch 2; fsdp=8: batch 16 (2 per device), "
    "the peak per device.",
    "",
    f"| model | parameters | dtype | weights {per} (all) | one device {per} "
    f"| fsdp=8, per device {per} | / float32 (one device, fsdp=8) | "
    "the papers | compile s |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  for (model, dtype), by in cells.items():
    count = counts[model]
    size = 4 if dtype == "float32" else 2
    one, mesh = by.get(1), next((v for d, v in by.items() if d > 1), None)
    weights = count * size / UNIT[unit]
    row = [
      model,
      f"{count / 1e9:.2f}B",
      dtype,
      f"{weights:.2f}"
      + (f" / {count * size / 1e9:.2f}" if unit == "GiB" else ""),
      _both(one, unit),
      _both(mesh, unit),
      _ratios(by, cells.get((model, "float32"), {})) if size == 2 else "",
      PAPER_FULL.get((model, dtype), ""),
      f"{sum(r.get('compile_s', 0) for r in by.values()):.0f}",
    ]
    lines.append("| " + " | ".join(row) + " |")
  return lines + [""]


TITLES = {
  "single": "## One device, bfloat16, batch 2 x {length}",
  "mesh": "## 8-device FSDP mesh (fsdp=8), bfloat16, batch {batch} x "
  "{length} (2 sequences per device): per device",
  "accelerator": "## The shapes `accelerator.py` runs: one device, "
  "bfloat16, batch {batch} x {length}",
}


def section_lines(section, results: dict, counts: dict, unit: str):
  """The table of ``section`` (one row per model)."""
  chosen = {s: r for s, r in results.items() if s.section == section}
  if not chosen:
    return []
  first = next(iter(chosen))
  lines = [TITLES[section].format(**first._asdict()), ""]
  if section == "accelerator":
    lines += [
      "Set these beside the `measured peak MiB` of `accelerator.md`'s "
      "device section (the process's `peak_bytes_in_use` over the forward "
      "pass and its three layer-wise steps, dp_zo's peak among them) and "
      "its device-compiled peaks: the check of this CPU proxy.",
      "",
    ]
  names = list(first.rows)
  lines += [
    f"| model | parameters | weights {unit} | "
    + " | ".join(map(_label, names))
    + " | "
    "fits 80 GB | compile s |",
    "|---|---|---|" + "---|" * len(names) + "---|---|",
  ]
  for setting, rows in chosen.items():
    count = counts[setting.model]
    cells = [
      setting.model,
      f"{count / 1e9:.2f}B",
      _weights(setting, count, unit),
      *(_cell(rows[n], unit) for n in names),
      _fits(rows),
      _seconds(rows),
    ]
    lines.append("| " + " | ".join(cells) + " |")
  return lines + [""]


def head_lines(results: dict, seconds: float, tiny: bool) -> list[str]:
  every = [r for rows in results.values() for r in rows.values()]
  compiling = sum(r.get("compile_s", 0.0) for r in every)
  rss = max(
    [r.get("host_rss", 0) for r in every]
    + [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024]
  )
  return [
    "# Paper-scale memory by compilation: per-device compiled peak",
    "",
    "Command: `"
    + " ".join(["python benchmarks/paper_scale_memory.py", *sys.argv[1:]])
    + "`  ",
    f"Machine: {platform.machine()}, {os.cpu_count()} cores, "
    f"{jax.device_count()} simulated "
    f"{jax.devices()[0].platform} devices, jax {jax.__version__}; compiled "
    f"only, nothing run, no weights, each row in its own process "
    f"({compiling:.0f} s of compiling in all, the rows' `compile s`; this "
    f"invocation {seconds:.0f} s, the rest read from the .json; largest "
    "host peak RSS "
    f"{rss / GIB:.1f} GiB, load {tuple(round(x, 2) for x in os.getloadavg())}"
    ").  ",
    f"Cells: the compiled peak per device in {'MiB' if tiny else 'GiB'} "
    "(arguments + outputs + "
    "temporaries - aliased, `compiled.memory_analysis()`); `(over)`: more "
    f"than {FIT_BYTES // GIB} GiB, what an 80 GB device (A100 / H100 80GB) "
    "leaves a program after the runtime's own allocations. `fits 80 GB` "
    "lists the programs at or under that. Every loss but the runner's full "
    "fine-tuning section's is on an answer window of 8 tokens (the LM head "
    "on 8 positions, by vocabulary chunks); that section's is over every "
    "position.",
    "",
    "**XLA:CPU's compiled peak is a proxy for GPU memory, not a GPU "
    "measurement.** The CPU compiler makes its own fusion and buffer "
    "decisions; a GPU adds the CUDA context, library workspaces (cuBLAS, "
    "cuDNN) and allocator fragmentation, and a framework's caching "
    "allocator may hold more than a program's peak. The proxy is checked "
    "against `benchmarks/accelerator.py`'s measured peak (and the device's "
    "own compiled peak) whenever a device is lent: the last section holds "
    "this script's figures for the same programs at that script's shapes.",
    "",
  ]


FULL_NOTE = (
  "- The runner's full fine-tuning section: `the papers` quotes what the "
  "stored papers say of full-parameter fine-tuning at these sizes. DP-ZO's "
  "Table 5 measures OPT-2.7B only (the first table); MeZO's memory figures "
  "are not among the stored papers, so none stands here; MeZO's abstract "
  "says full-parameter MeZO of a 30B model runs on one A100 80GB "
  "(float16 weights), DP-ZO's Section 5 that OPT-66B's parameters do not "
  "fit one A100. float16 and bfloat16 store the same bytes; on one device "
  "XLA:CPU gives the float16 step more temporaries (the same on the mesh), "
  "which was not investigated."
)


NOTES = [
  "## Notes",
  "",
  "- `dp_sgd ghost` in DP-ZO Table 5's setting (the first table) is ghost "
  "clipping through the layer stacks (`zoprivacy/first_order/"
  "layer_stack.py`: each scanned Dense/LayerNorm its own certified part): "
  "63.18 / 71.99 / 132.10 GiB at 128 / 512 / 2048 tokens in float32, where "
  "per-example gradients in every decoder layer compiled to 88.59 / 88.61 "
  "/ 158.79 (the paper's ghost DP-SGD: 32.9 / 39.6 GB / OOM). The tied "
  "embedding, which the LM head also reads, still falls back to its "
  "per-example gradient (named by the fallback warning); the rest of the "
  "gap to the paper was not attributed. The `dp_sgd ghost` cells of the "
  "mesh and one-device sections were compiled before ghost clipping "
  "reached the scanned layers (every decoder layer then fell back to "
  "per-example gradients) and await a rerun.",
  "- The float32 rows are the paper's precision; the project's 16-bit "
  "policy stores weights in bfloat16 (or float16) and computes in float32 "
  "(the perturbation is added in float32).",
  "- The mesh places each parameter leaf sharded on its largest dimension "
  "divisible by 8 (`zoprivacy.core.sharding.param_shardings`) and the "
  "batch split over the 8 devices; XLA gathers each layer's parameters "
  "inside the layer loop.",
]


ERROR_NOTES = {
  "2^32": "- `refused: a leaf of 2^32+ elements`: the layer-wise step drew "
  "its direction with the counter hash, which numbers the elements of one "
  "leaf with 32-bit counters, and refuses a stacked leaf of 2^32 elements "
  "or more (OPT-30B's FFN kernels stack 48 x 7168 x 28672 = 9.9e9 "
  "elements, OPT-66B's 64 x 9216 x 36864). That was the generator when "
  "these cells were compiled; it now numbers leaves of any size, and the "
  "runner's full fine-tuning section compiles these shapes.",
  "aborted": "- `XLA:CPU aborts compiling`: the compiler stops on a failed "
  "check (`hlo_instruction.cc`: a reshape of one float32 array of more "
  "than 2^31 elements, whose size overflows XLA:CPU's 32-bit shape "
  "arithmetic; at OPT-30B on the mesh it is one stacked leaf's per-example "
  "gradients, 2.5e9 elements, 9.9 GB). Where the same DP-SGD compiles, at "
  "a smaller shape in the same section, it is already over 80 GB.",
}


def report(results: dict, counts: dict, seconds: float, tiny=False):
  """The whole file's lines."""
  lines, unit = head_lines(results, seconds, tiny), "MiB" if tiny else "GiB"
  if any(s.section == "table5" for s in results):
    lines += table5_lines(results, counts, unit)
  for section in ("mesh", "single", "accelerator"):
    lines += section_lines(section, results, counts, unit)
  lines += full_lines(results, counts, unit)
  errors = [
    r.get("error", "") for rows in results.values() for r in rows.values()
  ]
  notes = [n for k, n in ERROR_NOTES.items() if any(k in e for e in errors)]
  full = [FULL_NOTE] if any(s.section == "full" for s in results) else []
  return lines + NOTES + full + notes
