"""16-bit stored weights (bfloat16, float16) against float32: the
compiled peak of the causal LMs' forward passes and of the runner's own
full fine-tuning step.

    python benchmarks/llm_memory_bf16.py [--models opt-125m,opt-1.3b]

For each model, with every weight stored in float32, bfloat16 and float16
(float32 compute), compile only (nothing runs, no weights:
``jax.ShapeDtypeStruct`` arguments), batch 8 x 256 tokens:

* ``forward (the model's nn.scan)``: the model's own forward pass, as
  evaluation and every step that is not layer-wise run it
  (``per_example_lm_loss`` with the model, loss on an answer window of 8);
* ``forward (in-scan)``: the layer-wise steps' forward pass
  (:func:`zoprivacy.models.causal_lm_zo.perturbed_forward`, unperturbed);
* the runner's full fine-tuning step, the program a run jits
  (:mod:`runner_program`: ``configs/dpzero_table4_5_opt.py``, every weight
  trained and stored in the dtype, the layer-wise step with its
  stochastically rounded update), on SQuAD (one 256-token sequence per
  example) and, with ``--sst2``, on SST-2 (two candidate sequences per
  example: 16 sequences).

Peak = arguments + outputs + temporaries - aliased
(``compiled.memory_analysis()``). Target: 16-bit at most 0.55x float32 for
the runner's step. A last column counts the entry computation's values
shaped ``f32[L, ...]`` (a whole layer stack converted to float32 outside
the layer loop: what XLA:CPU's float normalization of a bfloat16
``dynamic-slice`` used to produce). Writes
``benchmarks/results/llm_memory_bf16.md``.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import re
import time

import jax
import llm_memory
from llm_memory import BATCH, LENGTH, WINDOW
from runner_program import runner_step
from timing import compiled_peak

from experiments.tasks import llm
from zoprivacy.models import causal_lm_zo
from zoprivacy.models.opt import OPTConfig, per_example_lm_loss

RUNNER_STEP = "the runner's full fine-tuning step (SQuAD, layer-wise)"
RUNNER_STEP_SST2 = "the runner's full fine-tuning step (SST-2, 2 candidates)"
PRECISION_ROWS = (
  "forward (the model's nn.scan)",
  "forward (in-scan)",
  RUNNER_STEP,
)
DTYPES = ("float32", "bfloat16", "float16")
OPT_1_3B = OPTConfig(
  hidden_size=2048, num_hidden_layers=24, ffn_dim=8192, num_attention_heads=32
)
MODELS = {
  "opt-125m": llm_memory.CONFIGS["opt-125m"],
  "opt-1.3b": OPT_1_3B,
  "mistral-shape-150m": llm_memory.CONFIGS["mistral-shape-150m"],
}
MAX_RATIO = 0.55


def float32_stacks(compiled, layers: int) -> int:
  """Instructions of the entry computation whose value is a whole float32
  layer stack ``f32[layers, ...]`` (parameters excluded): the evidence of
  a stack converted outside the layer loop."""
  text = compiled.as_text()
  entry = text[text.index("\nENTRY") :].splitlines()[1:]
  stack = re.compile(rf"^  %\S+ = f32\[{layers},")
  return sum(
    1 for line in entry if stack.match(line) and " parameter(" not in line
  )


def _calls(config, batch_size, length, dtype: str) -> dict:
  """``{row: (jitted, args) or lowered}`` of the rows for weights stored
  in ``dtype`` (abstract: nothing is allocated)."""
  model, params, batch, _ = llm_memory.abstract_inputs(
    config, batch_size, length, llm.PARAM_DTYPES[dtype]
  )
  loss = functools.partial(
    per_example_lm_loss, model=model, answer_window=WINDOW
  )
  in_scan = causal_lm_zo.in_scan_lm_loss(model=model, answer_window=WINDOW)
  step = functools.partial(runner_step, config, dtype, batch_size)
  return {
    PRECISION_ROWS[0]: lambda: jax.jit(loss).lower(params, batch),
    PRECISION_ROWS[1]: lambda: jax.jit(
      lambda p, b: in_scan(p, None, b, None)
    ).lower(params, batch),
    RUNNER_STEP: lambda: step(length=length),
    RUNNER_STEP_SST2: lambda: step(dataset="sst2_opt", length=length),
  }


def measure_precision(
  config, batch_size=BATCH, length=LENGTH, rows=PRECISION_ROWS, dtypes=DTYPES
) -> dict:
  """``{dtype: {row: (peak bytes, float32 stacks)}}`` for weights stored in
  each of ``dtypes`` (all trainable), the rows of ``rows``."""
  out = {}
  for dtype in dtypes:
    calls = _calls(config, batch_size, length, dtype)
    peaks = {}
    for name in rows:
      compiled = calls[name]().compile()
      peaks[name] = (
        compiled_peak(compiled),
        float32_stacks(compiled, config.num_hidden_layers),
      )
    out[dtype] = peaks
  return out


def precision_table(name: str, result: dict) -> list[str]:
  """The table of :func:`measure_precision`: each dtype against float32."""
  f32 = result["float32"]
  narrow = [d for d in result if d != "float32"]
  lines = [
    f"## {name}: 16-bit against float32 stored weights",
    "",
    "| pass | float32 MiB | "
    + " | ".join(f"{d} MiB | {d} / float32" for d in narrow)
    + " | 16-bit: f32[L,...] values outside the loop |",
    "|---|---|" + "---|---|" * len(narrow) + "---|",
  ]
  for row in f32:
    cells = [f"{f32[row][0] / 2**20:.1f}"]
    for d in narrow:
      peak = result[d][row][0]
      cells += [f"{peak / 2**20:.1f}", f"{peak / f32[row][0]:.3f}"]
    stacks = max(result[d][row][1] for d in narrow)
    lines.append(f"| {row} | " + " | ".join(cells) + f" | {stacks} |")
  return lines + [""]


def header(names, seconds: float) -> list[str]:
  device = jax.devices()[0]
  return [
    "# 16-bit stored weights: compiled peak against float32",
    "",
    "Command: `python benchmarks/llm_memory_bf16.py --sst2`  ",
    f"Machine: {platform.machine()}, device {device.platform} "
    f"({device.device_kind}), jax {jax.__version__}; shapes "
    f"{', '.join(names)}; batch {BATCH} examples, sequence {LENGTH}; the "
    f"forwards' loss on an answer window of {WINDOW}; every weight "
    "trainable and stored in the dtype, float32 compute; compiled only "
    f"({seconds:.0f} s).  ",
    "Peak = arguments + outputs + temporaries - aliased. The runner's rows "
    "compile the step a run of `configs/dpzero_table4_5_opt.py` (full "
    "fine-tuning, layer-wise, exact noise, the update stochastically "
    "rounded into the 16-bit weights) jits: "
    "`experiments.run.step_program.lowered`, not a copy. Target: the "
    f"runner's step at most {MAX_RATIO}x float32 in 16 bits. The last "
    "column counts the entry computation's values shaped `f32[L, ...]` (a "
    "whole layer stack converted to float32 outside the layer loop).",
    "",
    "XLA:CPU has no bfloat16 `dynamic-slice`: its float normalization "
    "upcasts a sliced bfloat16 stack whole and hoists the convert out of "
    "the layer loop, so a scan over bfloat16 layers held a float32 copy of "
    "every stacked leaf. Every pass here slices 16-bit stacks as their "
    "bits inside the loop (`zoprivacy.models.narrow_slices`; the model's "
    "own forward through `zoprivacy.models.stacked_layers`), gathers "
    "embedding rows as bits and runs a 16-bit LM head by vocabulary "
    "chunks, so only one layer (or one chunk) is float32 at a time. The "
    "update rounds stochastically with integer arithmetic on the float32 "
    "bits (a float `nextafter` there converted every stack whole).",
    "",
  ]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--models", default=",".join(MODELS))
  parser.add_argument(
    "--out",
    default=os.path.join(
      os.path.dirname(__file__), "results", "llm_memory_bf16.md"
    ),
  )
  parser.add_argument(
    "--sst2", action="store_true", help="also the runner's SST-2 step"
  )
  args = parser.parse_args()
  names = [n for n in MODELS if n in args.models.split(",")]
  rows = PRECISION_ROWS + ((RUNNER_STEP_SST2,) if args.sst2 else ())
  start, lines = time.perf_counter(), []
  for name in names:
    lines += precision_table(name, measure_precision(MODELS[name], rows=rows))
    print("\n".join(lines[-len(rows) - 5 :]), flush=True)
  with open(args.out, "w") as f:
    f.write("\n".join(header(names, time.perf_counter() - start) + lines))


if __name__ == "__main__":
  main()
