"""bfloat16 stored weights against float32: the compiled peak of the
causal LMs' forward passes and of the layer-wise DP-ZO step.

    python benchmarks/llm_memory_bf16.py [--models opt-125m,opt-1.3b]

For each model, with every leaf stored in float32 and then in bfloat16
(float32 compute, all trainable), compile only (nothing runs, no weights:
``jax.ShapeDtypeStruct`` arguments), batch 8 x 256, loss on an answer
window of 8 tokens:

* ``forward (the model's nn.scan)``: the model's own forward pass, as
  evaluation and every step that is not layer-wise run it
  (``per_example_lm_loss`` with the model);
* ``forward (in-scan)``: the layer-wise steps' forward pass
  (:func:`zoprivacy.models.causal_lm_zo.perturbed_forward`, unperturbed);
* the layer-wise DP-ZO step (the runner's).

Peak = arguments + outputs + temporaries - aliased
(``compiled.memory_analysis()``). Target: bfloat16 at most 0.6x float32
on every row. A second column counts the entry computation's values shaped
``f32[L, ...]`` (a whole layer stack converted to float32 outside the layer
loop: what XLA:CPU's float normalization of a bfloat16 ``dynamic-slice``
used to produce). Writes ``benchmarks/results/llm_memory_bf16.md``.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import re
import time

import jax
import jax.numpy as jnp
import llm_memory
from llm_memory import BATCH, LAYERWISE, LENGTH, WINDOW
from timing import compiled_peak

from zoprivacy.models import causal_lm_zo
from zoprivacy.models.opt import OPTConfig, per_example_lm_loss

PRECISION_ROWS = (
  "forward (the model's nn.scan)",
  "forward (in-scan)",
  LAYERWISE,
)
OPT_1_3B = OPTConfig(
  hidden_size=2048, num_hidden_layers=24, ffn_dim=8192, num_attention_heads=32
)
MODELS = {
  "opt-125m": llm_memory.CONFIGS["opt-125m"],
  "opt-1.3b": OPT_1_3B,
  "mistral-shape-150m": llm_memory.CONFIGS["mistral-shape-150m"],
}
MAX_RATIO = 0.6


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


def _calls(config, batch_size, length, dtype) -> dict:
  """``{row: (jitted, args)}`` of :data:`PRECISION_ROWS` for weights
  stored in ``dtype`` (abstract: nothing is allocated)."""
  model, params, batch, mask = llm_memory.abstract_inputs(
    config, batch_size, length, dtype
  )
  loss = functools.partial(
    per_example_lm_loss, model=model, answer_window=WINDOW
  )
  in_scan = causal_lm_zo.in_scan_lm_loss(model=model, answer_window=WINDOW)
  steps = llm_memory.step_functions(model, (LAYERWISE,))
  make_state, step, donate = steps[LAYERWISE]
  return {
    PRECISION_ROWS[0]: (jax.jit(loss), lambda: (params, batch)),
    PRECISION_ROWS[1]: (
      jax.jit(lambda p, b: in_scan(p, None, b, None)),
      lambda: (params, batch),
    ),
    LAYERWISE: (
      jax.jit(step, donate_argnums=donate),
      lambda: (params, make_state(params), batch, mask),
    ),
  }


def measure_precision(
  config, batch_size=BATCH, length=LENGTH, rows=PRECISION_ROWS
) -> dict:
  """``{dtype: {row: (peak bytes, float32 stacks)}}`` for float32 and
  bfloat16 stored weights (all trainable), the rows of ``rows``."""
  out = {}
  for dtype in (jnp.float32, jnp.bfloat16):
    calls = _calls(config, batch_size, length, dtype)
    peaks = {}
    for name in rows:
      jitted, args = calls[name]
      compiled = jitted.lower(*args()).compile()
      peaks[name] = (
        compiled_peak(compiled),
        float32_stacks(compiled, config.num_hidden_layers),
      )
    out[jnp.dtype(dtype).name] = peaks
  return out


def precision_table(name: str, result: dict) -> list[str]:
  """The float32 / bfloat16 table of :func:`measure_precision`."""
  f32, bf16 = result["float32"], result["bfloat16"]
  lines = [
    f"## {name}: bfloat16 against float32 stored weights",
    "",
    "| pass | float32 MiB | bfloat16 MiB | bfloat16 / float32 | "
    "bfloat16: f32[L,...] values outside the loop |",
    "|---|---|---|---|---|",
  ]
  for row in f32:
    (a, _), (b, stacks) = f32[row], bf16[row]
    lines.append(
      f"| {row} | {a / 2**20:.1f} | {b / 2**20:.1f} | {b / a:.3f} | {stacks} |"
    )
  return lines + [""]


def header(names, seconds: float) -> list[str]:
  device = jax.devices()[0]
  return [
    "# bfloat16 stored weights: compiled peak against float32",
    "",
    "Command: `python benchmarks/llm_memory_bf16.py`  ",
    f"Machine: {platform.machine()}, device {device.platform} "
    f"({device.device_kind}), jax {jax.__version__}; shapes "
    f"{', '.join(names)}; batch {BATCH}, sequence {LENGTH}, answer window "
    f"{WINDOW}; every leaf trainable and stored in the dtype, float32 "
    f"compute; compiled only ({seconds:.0f} s).  ",
    "Peak = arguments + outputs + temporaries - aliased. Target: every row "
    f"at most {MAX_RATIO}x float32 with bfloat16 weights. The last column "
    "counts the entry computation's values shaped `f32[L, ...]` (a whole "
    "layer stack converted to float32 outside the layer loop).",
    "",
    "XLA:CPU has no bfloat16 `dynamic-slice`: its float normalization "
    "upcasts a sliced bfloat16 stack whole and hoists the convert out of "
    "the layer loop, so a scan over bfloat16 layers held a float32 copy of "
    "every stacked leaf. Every pass here slices 16-bit stacks as their "
    "bits inside the loop (`zoprivacy.models.narrow_slices`; the model's "
    "own forward through `zoprivacy.models.stacked_layers`), gathers "
    "embedding rows as bits and runs a 16-bit LM head by vocabulary "
    "chunks, so only one layer (or one chunk) is float32 at a time. Before "
    "that, the model's own forward was at 1.167x (opt-125m) and 1.393x "
    "(opt-1.3b) with 18 stacks converted outside the loop.",
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
  args = parser.parse_args()
  names = [n for n in MODELS if n in args.models.split(",")]
  start, lines = time.perf_counter(), []
  for name in names:
    lines += precision_table(name, measure_precision(MODELS[name]))
    print("\n".join(lines[-7:]), flush=True)
  with open(args.out, "w") as f:
    f.write("\n".join(header(names, time.perf_counter() - start) + lines))


if __name__ == "__main__":
  main()
