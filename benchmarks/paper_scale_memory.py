r"""Per-device compiled peak memory at the DP-ZO paper's model sizes
(OPT-2.7B to OPT-66B), compile only.

    python benchmarks/paper_scale_memory.py            # every section
    python benchmarks/paper_scale_memory.py --sections mesh --models opt-66b
    python benchmarks/paper_scale_memory.py --tiny     # tiny shapes (CI)

Nothing runs and no weight exists: every program is lowered on
``jax.ShapeDtypeStruct`` arguments (parameters from ``jax.eval_shape`` of
the model's init) and compiled for XLA:CPU, and the per-device peak is read
from ``compiled.memory_analysis()`` as arguments + outputs + temporaries -
aliased (donated buffers counted once). Sets
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` and the CPU platform
itself.

Programs (rows), on random-weight OPT shapes (vocabulary 50,272, FFN 4x
the width; the loss on each example's answer window of 8 tokens, as in
``llm_memory.py``):

* ``forward``: the model's own forward pass computing the per-example loss
  (evaluation; :func:`zoprivacy.models.opt.per_example_lm_loss`);
* ``forward (in-scan)``: the layer-wise steps' forward pass (the
  ``accelerator`` section only: the pass ``accelerator.py`` times);
* ``dp_zo layer-wise``: the runner's step for causal LMs (DP-ZO, the
  perturbation added inside the layer scan, the update written into the
  donated parameters);
* ``dp_zo layer-wise, LoRA``: the same step training rank-8 LoRA adapters
  (alpha 16, float32) on the stacked query and value projections, the
  weights frozen (the runner's ``config.peft='lora'``; DP-ZO's LoRA
  setting);
* ``dp_sgd ghost``: first-order DP-SGD with ghost clipping + SGD
  (``llm_memory.step_functions``);
* ``the runner's full fine-tuning``: the step a run of
  ``configs/dpzero_table4_5_opt.py`` on SQuAD jits (``runner_program``:
  :func:`experiments.run.step_program.lowered`, not a copy; every weight
  trained and stored in the dtype, the layer-wise step, exact noise), its
  loss over every predicted position (the positions whose logits MeZO's
  and DP-ZO's programs compute, by vocabulary chunks here), placed as the
  runner places a run (``config.mesh``) on the FSDP mesh.

Sections: ``table5``: DP-ZO Table 5's setting, OPT-2.7B on one device,
batch 2, sequence 128 / 512 / 2048, full precision (float32) as the paper,
then bfloat16 at 2048; ``single``: the larger shapes on one device,
bfloat16, batch 2 x 2048; ``mesh``: every shape on an 8-device FSDP mesh
(``fsdp=8``: each leaf sharded on its largest dimension divisible by 8,
the batch split over the devices, as the runner places a run), bfloat16,
batch 16 x 2048 (2 sequences per device); ``accelerator``: the programs and
shapes that ``accelerator.py`` runs on a lent device (opt-1.3b to 13b,
bfloat16, batch 16 x 256), so that its measured peaks can be set beside
these; ``full``: the runner's full fine-tuning step of OPT-13B, 30B and
66B in bfloat16, float32 and float16, batch 2 x 2048 on one device and
16 x 2048 on the fsdp=8 mesh (bfloat16 first: the order to stop in). Writes ``benchmarks/results/paper_scale_memory.md``, and each row's
figures to ``paper_scale_memory.json`` beside it: a rerun reads the rows
found there (a stopped run resumes), ``--fresh`` measures them all again.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import NamedTuple  # noqa: E402

import accelerator  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import llm_memory  # noqa: E402
import paper_scale_report  # noqa: E402
import runner_program  # noqa: E402
from accelerator import opt_shape  # noqa: E402
from llm_memory import LAYERWISE, WINDOW  # noqa: E402
from timing import compiled_peak  # noqa: E402

from zoprivacy.core import sharding  # noqa: E402
from zoprivacy.models import causal_lm_zo, peft  # noqa: E402
from zoprivacy.models.opt import per_example_lm_loss  # noqa: E402
from zoprivacy.training import layerwise  # noqa: E402

FORWARD, IN_SCAN, GHOST = "forward", "forward (in-scan)", "dp_sgd ghost"
LORA = "dp_zo layer-wise, LoRA"
RUNNER_FULL = "the runner's full fine-tuning"
ROWS = (FORWARD, LAYERWISE, LORA, GHOST)
MESH_DEVICES = 8
FULL_MODELS = ("opt-13b", "opt-30b", "opt-66b")
FULL_DTYPES = ("bfloat16", "float32", "float16")


MODELS = {  # the published OPT shapes (accelerator.py's, then 30b and 66b)
  **accelerator.MODELS,
  "opt-30b": opt_shape(7168, 48, 56),
  "opt-66b": opt_shape(9216, 64, 72),
}
TINY = {  # --tiny: the same sections on small shapes (a check that it runs)
  name: opt_shape(64 * (i + 1), 2 + i, 4, vocab=512, positions=64)
  for i, name in enumerate(MODELS)
}
PAPER = tuple(MODELS)[1:]  # DP-ZO Table 2's sizes
ACCELERATOR = tuple(accelerator.MODELS)  # the shapes that script runs


class Setting(NamedTuple):
  """One model compiled at one precision, batch and placement."""

  section: str
  model: str
  dtype: str  # "float32" | "bfloat16" | "float16"
  batch: int
  length: int
  devices: int  # 1, or MESH_DEVICES on an fsdp mesh
  rows: tuple


def settings(tiny: bool = False) -> list[Setting]:
  """Every setting of every section (module docstring); ``tiny`` divides
  the sequence lengths by 32."""
  cut = 32 if tiny else 1
  long = 2048 // cut
  out = [
    Setting("table5", "opt-2.7b", "float32", 2, length // cut, 1, ROWS)
    for length in (128, 512, 2048)
  ]
  out.append(Setting("table5", "opt-2.7b", "bfloat16", 2, long, 1, ROWS))
  out += [
    Setting("mesh", m, "bfloat16", 2 * MESH_DEVICES, long, MESH_DEVICES, ROWS)
    for m in PAPER
  ]
  out += [Setting("single", m, "bfloat16", 2, long, 1, ROWS) for m in PAPER[1:]]
  out += [
    Setting(
      "accelerator", m, "bfloat16", 16, 256 // cut, 1, (IN_SCAN, LAYERWISE)
    )
    for m in ACCELERATOR
  ]
  return out + [
    Setting("full", m, dtype, 2 * devices, long, devices, (RUNNER_FULL,))
    for dtype in FULL_DTYPES
    for m in FULL_MODELS
    for devices in (1, MESH_DEVICES)
  ]


def _with_sharding(tree, shardings):
  return jax.tree.map(
    lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
    tree,
    shardings,
  )


def _placed(setting: Setting, config):
  """``(model, params, batch, mask, mesh or None)``, abstract, sharded on
  the fsdp mesh when ``setting.devices > 1``."""
  dtype = jnp.dtype(setting.dtype)
  model, params, batch, mask = llm_memory.abstract_inputs(
    config, setting.batch, setting.length, dtype
  )
  if setting.devices == 1:
    return model, params, batch, mask, None
  mesh = sharding.make_mesh({"fsdp": setting.devices})
  params = _with_sharding(params, sharding.param_shardings(mesh, params))
  split = sharding.data_sharding(mesh)
  batch = _with_sharding(batch, jax.tree.map(lambda _: split, batch))
  return model, params, batch, _with_sharding(mask, split), mesh


def _lora_lowered(model, params, batch, mask, mesh):
  """The runner's LoRA step (``config.peft='lora'``): rank-8 adapters
  (alpha 16) on the stacked query and value projections, trained in
  float32, the weights frozen in their stored dtype; the layer-wise DP-ZO
  step of ``llm_memory.step_functions`` otherwise."""
  lora = peft.StackedLoRA(rank=8, alpha=16.0)
  adapters = jax.eval_shape(
    lambda p: jax.tree.map(
      lambda x: x.astype(jnp.float32), lora.init(jax.random.key(0), p)
    ),
    params,
  )
  zo = layerwise.layerwise_dpzero(
    perturbed_loss=causal_lm_zo.in_scan_lm_loss(
      model=model,
      answer_window=WINDOW,
      assemble=lambda trainable, frozen: lora.merge(frozen, trainable),
    ),
    learning_rate=1e-6,
    clip_target="raw_difference",
    smoothing=1e-3,
    directions="gaussian",
    **llm_memory.PRIVACY,
  )
  state = zo.init(adapters)
  step = lambda t, s, f, b, m: zo.step(t, s, b, frozen=f, mask=m)
  if mesh is None:
    jitted = jax.jit(step, donate_argnums=0)
  else:
    shardings = sharding.param_shardings(mesh, adapters)
    adapters = _with_sharding(adapters, shardings)
    jitted = jax.jit(step, donate_argnums=0, out_shardings=(shardings, None))
  return jitted.lower(adapters, state, params, batch, mask)


def _runner_lowered(setting: Setting, config):
  """The runner's own full fine-tuning step (module docstring) on
  ``config``'s shapes, on the fsdp mesh when ``setting.devices > 1``."""
  mesh = {"data": 1, "fsdp": setting.devices, "model": 1}
  return runner_program.runner_step(
    config, setting.dtype, setting.batch, length=setting.length, mesh=mesh
  )


def _lowered(row: str, setting: Setting, config):
  """The lowered program of ``row`` in ``setting``."""
  if row == RUNNER_FULL:
    return _runner_lowered(setting, config)
  model, params, batch, mask, mesh = _placed(setting, config)
  if row == LORA:
    return _lora_lowered(model, params, batch, mask, mesh)
  if row == FORWARD:
    loss = functools.partial(
      per_example_lm_loss, model=model, answer_window=WINDOW
    )
    return jax.jit(loss).lower(params, batch)
  if row == IN_SCAN:
    loss = causal_lm_zo.in_scan_lm_loss(model=model, answer_window=WINDOW)
    return jax.jit(lambda p, b: loss(p, None, b, None)).lower(params, batch)
  make_state, step, donate = llm_memory.step_functions(model, (row,))[row]
  state = make_state(params)
  if mesh is None:
    return jax.jit(step, donate_argnums=donate).lower(
      params, state, batch, mask
    )
  param_out = sharding.param_shardings(mesh, params)
  state_out = sharding.param_shardings(mesh, state)
  jitted = jax.jit(
    step, donate_argnums=donate, out_shardings=(param_out, state_out)
  )
  return jitted.lower(params, _with_sharding(state, state_out), batch, mask)


def measure(row: str, setting: Setting, config) -> dict:
  """``{peak, arguments, temporaries, compile_s, host_rss}`` (bytes,
  per device) of one row, or ``{error}`` when it does not compile."""
  start = time.perf_counter()
  try:
    compiled = _lowered(row, setting, config).compile()
  except Exception as e:  # noqa: BLE001 - reported in the table
    return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
  m = compiled.memory_analysis()
  return {
    "peak": compiled_peak(compiled),
    "arguments": int(m.argument_size_in_bytes),
    "temporaries": int(m.temp_size_in_bytes),
    "compile_s": time.perf_counter() - start,
    "host_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
  }


def param_count(config) -> int:
  _, params, _, _ = llm_memory.abstract_inputs(config, 1, 8)
  return sum(x.size for x in jax.tree.leaves(params))


def measure_in_child(row: str, setting: Setting, tiny: bool) -> dict:
  """:func:`measure` in a fresh process (the main process survives an
  XLA:CPU abort, which is then the row's result, and each compile's host
  memory is its own)."""
  spec = json.dumps({"row": row, "setting": setting._asdict(), "tiny": tiny})
  out = subprocess.run(
    [sys.executable, os.path.abspath(__file__), "--child", spec],
    capture_output=True,
    text=True,
    env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
  )
  if out.returncode == 0:
    return json.loads(out.stdout.strip().splitlines()[-1])
  lines = out.stderr.strip().splitlines() or [f"exit {out.returncode}"]
  why = next((l for l in lines if "Check failed" in l), lines[-1])
  return {"error": f"XLA:CPU aborted ({why.strip()[:160]})"}


def child(spec: str):
  """``--child``: one row's :func:`measure` printed as JSON."""
  spec = json.loads(spec)
  setting = Setting(
    **{**spec["setting"], "rows": tuple(spec["setting"]["rows"])}
  )
  configs = TINY if spec["tiny"] else MODELS
  result = measure(spec["row"], setting, configs[setting.model])
  print(json.dumps(result), flush=True)


def cache_key(setting: Setting, row: str) -> str:
  fields = (*setting[:-1], row)  # everything but the row tuple
  return "|".join(map(str, fields))


def run(chosen: list[Setting], tiny: bool, write, cache_path, every=()) -> dict:
  """``{setting: {row: measure(...)}}``, printed as it goes. Each row's
  result is kept in the JSON file ``cache_path`` (a stopped run resumes
  there; ``--fresh`` measures again), and ``write(results)`` runs after
  each setting (what a stopped run has measured). The settings of
  ``every`` not chosen are reported as the file has them (when it has
  all their rows): a run of some sections keeps the others' tables."""
  cache = {}
  if cache_path and os.path.exists(cache_path):
    with open(cache_path) as f:
      cache = json.load(f)
  results = {}
  for setting in [*every, *(s for s in chosen if s not in every)]:
    if setting not in chosen:
      rows = {r: cache.get(cache_key(setting, r)) for r in setting.rows}
      if None not in rows.values():
        results[setting] = rows
      continue
    results[setting] = {}
    for row in setting.rows:
      key = cache_key(setting, row)
      if key not in cache:
        cache[key] = measure_in_child(row, setting, tiny)
        if cache_path:
          with open(cache_path, "w") as f:
            json.dump(cache, f, indent=1, sort_keys=True)
      results[setting][row] = cache[key]
      print(setting, row, cache[key], flush=True)
    write(results)
  return results


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tiny", action="store_true")
  parser.add_argument("--child", help=argparse.SUPPRESS)
  parser.add_argument(
    "--sections", default="table5,single,mesh,accelerator,full"
  )
  parser.add_argument("--models", default=",".join(MODELS))
  parser.add_argument(
    "--fresh",
    action="store_true",
    help="measure every row again (default: rows in the .json next to "
    "--out are read from it)",
  )
  parser.add_argument(
    "--out",
    default=os.path.join(
      os.path.dirname(__file__), "results", "paper_scale_memory.md"
    ),
  )
  args = parser.parse_args(argv)
  if args.child:
    return child(args.child)
  assert jax.device_count() >= MESH_DEVICES, jax.devices()
  configs = TINY if args.tiny else MODELS
  sections, models = args.sections.split(","), args.models.split(",")
  chosen = [
    s
    for s in settings(args.tiny)
    if s.section in sections and s.model in models
  ]
  start = time.perf_counter()
  every = settings(args.tiny)  # the unchosen are reported from the .json
  counts = {m: param_count(configs[m]) for m in {s.model for s in every}}

  def write(results):
    lines = paper_scale_report.report(
      results, counts, time.perf_counter() - start, tiny=args.tiny
    )
    with open(args.out, "w") as f:
      f.write("\n".join(lines).rstrip() + "\n")
    return lines

  cache = os.path.splitext(args.out)[0] + ".json"
  if args.fresh and os.path.exists(cache):
    os.remove(cache)
  print("\n".join(write(run(chosen, args.tiny, write, cache, every))))


if __name__ == "__main__":
  main()
