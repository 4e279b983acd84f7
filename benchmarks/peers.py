r"""One private training step: zoprivacy's DPZero against first-order peers.

    python benchmarks/peers.py [--quick] [--out benchmarks/results/peers.md]

For the digits CNN (8x8x1), the wide MLP (28x28x1, ~4.2M parameters) and
the all-MiniLM-L6-v2 classifier (full fine-tuning, ``--minilm-length``
tokens), at batch 64 and 256, times one jitted training step (parameters
and optimizer state donated; min and median of interleaved calls after two
warm-up calls; calls over 1 s are sampled 3 times) and reads its compiled
peak memory (arguments + outputs + temporaries - aliased) for:

* ``dpzero (default)``: zoprivacy's DPZero (Zhang et al. 2024, Alg. 2) as
  a user gets it with no direction option (sphere directions,
  ``direction_prng='auto'``), first, the base of every ratio; then
  Gaussian directions with the threefry PRNG and with ``counter``;
* ``dp_sgd ghost (exact)`` / ``(float)`` / ``(secure_mode)``: zoprivacy's
  DP-SGD with ghost clipping and exact noise on the rounded sum (the
  default), float noise and secure_mode; ``dp_sgd explicit (exact)``: with
  materialized per-example gradients and exact lattice noise (the
  default), both drawn by the device sampler;
* ``optax dpsgd``: ``optax.contrib.dpsgd`` on ``vmap(grad)``;
* ``jax_privacy``: jax_privacy 2.x ``clipped_grad`` + Gaussian privatizer;
* ``opacus ghost``: Opacus' ghost clipping (``grad_sample_mode="ghost"``,
  ``peers/opacus_ghost.py``) on the torch twin of the CNN or MLP, torch
  CPU with as many threads as this machine has cores (what XLA uses), the
  best first-order peer; optional (``pip install opacus``);
* ``torch dpzero``: the PyTorch port of the reference DPZero step at one
  thread (``benchmarks/peers/torch_dpzero.py``; the MiniLM classifier's
  twin is ``torch_bert.py``, the same logits), timed in the same
  round-robin; its memory is parameters + batch + the resident growth over
  one step, measured in a child process;
* the floor of a zeroth-order step (``floor.py``): one compiled program
  holding two plain forward passes and one donated in-place pass over the
  parameters; every other call is timed right after a floor call, and
  every row reports the median over its calls of its time over that floor
  call's, in wall time and (in brackets) in this process's CPU time.

A JAX step whose compiled peak exceeds ``--max-run-gib`` is compiled (its
peak is reported) but not run. A second table pins a child process to one
CPU core and times JAX dpzero against the torch port there, so that both
use one core. torch and jax_privacy are optional (``pip install
zoprivacy[peers]``); without them their lines say so. The results file
keeps a hand-written ``## Discussion`` section across reruns.
"""

from __future__ import annotations

import argparse
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
from results_file import write_report
from timing import min_median_round_robin, paired_round_robin, peak_bytes

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))

import floor  # noqa: E402
import jax_steps  # noqa: E402
from minilm_config import MINILM_L6_CONFIG  # noqa: E402
from report import (  # noqa: E402
  DEFAULT,
  OPACUS,
  ORDER,
  TORCH,
  TORCH_CUDA,
  load_str,
  mib_str,
  ms_str,
  optional,
  setting_lines,
  target_lines,
  versions,
)

import zoprivacy  # noqa: E402
from zoprivacy.models import bert, minilm, small  # noqa: E402

CLIP, SIGMA, SMOOTHING, LR = 1.0, 1.0, 1e-3, 1e-3
# DP-SGD rows: ghost clipping with exact noise (the default), with the
# float opt-ins, and explicit per-example gradients with exact noise.
GHOST_ROWS = (
  ("ghost", "exact"),
  ("ghost", "float"),
  ("ghost", "secure_mode"),
  ("explicit", "exact"),
)


def cross_entropy(apply):
  def batched_loss(params, batch):
    inputs, labels = batch
    logits = apply(params, inputs)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels)

  return batched_loss


def image_task(model, shape, batch_size):
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(batch_size,) + shape).astype(np.float32))
  y = jnp.asarray(rng.integers(0, 10, size=batch_size).astype(np.int32))
  params = model.init(jax.random.key(0), x[:1])
  return cross_entropy(model.apply), params, (x, y)


def minilm_task(batch_size, length, weights="pretrained"):
  """all-MiniLM-L6-v2 + Dense(2) head on mean-pooled states, all trainable.

  ``weights="random"``: the same architecture randomly initialised, for a
  machine without the checkpoint (a lent GPU); a step's cost and compiled
  memory depend on the shapes only.
  """

  rng = np.random.default_rng(0)
  if weights == "pretrained":
    cfg, encoder = bert.load_hf_encoder(minilm.minilm_dir())
  else:
    cfg = bert.BertConfig(**MINILM_L6_CONFIG)
  ids = rng.integers(1000, cfg.vocab_size, size=(batch_size, length))
  ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP], every token real
  inputs = (jnp.asarray(ids, jnp.int32), jnp.ones((batch_size, length), bool))
  model = bert.BertClassifier(cfg, 2, pooling="mean")
  if weights == "pretrained":
    params = bert.classifier_params_from_encoder(
      encoder, cfg, 2, jax.random.key(0), "mean"
    )
  else:
    params = jax.jit(model.init)(jax.random.key(0), *inputs)["params"]
  labels = jnp.asarray(rng.integers(0, 2, size=batch_size), jnp.int32)
  apply = lambda p, x: model.apply({"params": p}, x[0], x[1])
  return cross_entropy(apply), params, (inputs, labels)


def dpzero_estimator(prng, batch_size):
  """The benchmarked DPZero: Gaussian directions drawn by ``prng``."""
  return zoprivacy.dpzero(
    clip=CLIP,
    noise_multiplier=SIGMA,
    smoothing=SMOOTHING,
    expected_batch_size=batch_size,
    directions="gaussian",
    direction_prng=prng,
  )


def jax_methods(batched_loss, params, batch_size, jax_privacy_microbatch=8):
  """``{name: (step, state)}`` for every JAX implementation (module doc)."""
  methods = {
    DEFAULT: zoprivacy.dpzero(
      clip=CLIP,
      noise_multiplier=SIGMA,
      smoothing=SMOOTHING,
      expected_batch_size=batch_size,
    )
  }
  for prng in ("threefry", "counter"):
    methods[f"dpzero ({prng})"] = dpzero_estimator(prng, batch_size)
  for mode, noise in GHOST_ROWS:
    methods[f"dp_sgd {mode} ({noise})"] = zoprivacy.dp_sgd(
      clip=CLIP,
      noise_multiplier=SIGMA,
      expected_batch_size=batch_size,
      per_example_clipping=mode,
      noise=noise,
    )
  steps = {
    k: jax_steps.zoprivacy_step(est, batched_loss, params, learning_rate=LR)
    for k, est in methods.items()
  }
  steps["optax dpsgd"] = jax_steps.optax_dpsgd_step(
    batched_loss, params, clip=CLIP, noise_multiplier=SIGMA, learning_rate=LR
  )
  if optional("jax_privacy") is not None:
    mb = jax_privacy_microbatch or None
    label = f"jax_privacy (microbatch {mb})" if mb else "jax_privacy (one vmap)"
    steps[label] = jax_steps.jax_privacy_step(
      batched_loss,
      params,
      clip=CLIP,
      noise_multiplier=SIGMA,
      expected_batch_size=batch_size,
      learning_rate=LR,
      microbatch_size=mb,
    )
  return steps


def donated_call(step, params, state, batch):
  """A zero-argument call that steps its own copy of params and state."""
  held = [jax.tree.map(jnp.copy, params), jax.tree.map(jnp.copy, state)]

  def call():
    held[0], held[1] = step(held[0], held[1], batch)
    return held[0]

  return call


def torch_device():
  """Where the torch port runs: the GPU when JAX runs on one, else the CPU."""
  import torch  # pylint: disable=g-import-not-at-top

  if jax.devices()[0].platform == "gpu" and torch.cuda.is_available():
    return "cuda"
  return "cpu"


def torch_memory(torch_twin, batch_size, device):
  """The torch port's parameters + batch + step growth (from a child on
  the CPU, from torch's allocator on the GPU)."""
  name, kwargs = torch_twin
  if device == "cuda":
    m = optional("torch_dpzero").cuda_step_memory(name, batch_size, **kwargs)
    return m["param_bytes"] + m["batch_bytes"] + m["step_growth_bytes"]
  env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
  out = subprocess.run(
    [
      sys.executable,
      os.path.join(HERE, "peers", "torch_dpzero.py"),
      "--model",
      name,
      "--batch",
      str(batch_size),
      "--memory",
    ]
    + [f"--{k}={v}" for k, v in kwargs.items()],
    env=env,
    capture_output=True,
    text=True,
    check=True,
  )
  m = json.loads(out.stdout.strip().splitlines()[-1])
  return m["param_bytes"] + m["batch_bytes"] + m["step_growth_bytes"]


def bench(task, torch_twin, batch_size, reps, max_run_bytes, microbatch):
  """``(num_params, param_bytes, Paired times, memory, not_run)`` for one
  setting, every call timed right after a call of the floor."""
  batched_loss, params, batch = task
  steps = jax_methods(batched_loss, params, batch_size, microbatch)
  memory, not_run = {}, {}
  fns = floor.floor_calls(batched_loss, params, batch)  # timed beside
  for name, (step, state) in steps.items():
    t0 = time.perf_counter()
    try:
      memory[name] = peak_bytes(step, params, state, batch)
    except ValueError as e:  # a setting the step refuses (its one paragraph)
      not_run[name] = "refused: " + str(e).split(". ")[0].rstrip(".")
      print(f"  {name}: {not_run[name]}", file=sys.stderr, flush=True)
      continue
    print(
      f"  {name}: compiled peak {mib_str(memory[name])} MiB "
      f"({time.perf_counter() - t0:.1f} s to compile)",
      file=sys.stderr,
      flush=True,
    )
    if memory[name] > max_run_bytes:
      not_run[name] = "compiled peak over --max-run-gib"
    else:
      fns[name] = donated_call(step, params, state, batch)
  torch_dpzero = optional("torch_dpzero") if optional("torch") else None
  if torch_twin and torch_dpzero is not None:
    import torch  # pylint: disable=g-import-not-at-top

    torch.set_num_threads(1)
    device = torch_device()
    t_step, x, y, _ = torch_dpzero.setup(
      torch_twin[0], batch_size, device=device, **torch_twin[1]
    )
    name = TORCH_CUDA if device == "cuda" else TORCH

    def torch_call():
      g = t_step(x, y)
      if device == "cuda":
        torch.cuda.synchronize()  # the update after the released scalar
      return g

    fns[name] = torch_call
    memory[name] = torch_memory(torch_twin, batch_size, device)
  elif torch_twin:
    not_run[TORCH] = "torch not installed"
  if torch_twin and torch_twin[0] in ("mlp", "cnn"):
    opacus_call = opacus_ghost_call(torch_twin[0], batch_size)
    if opacus_call is None:
      not_run[OPACUS] = "opacus not installed"
    else:
      fns[f"{OPACUS} ({os.cpu_count()} threads)"] = opacus_call
  paired = paired_round_robin(floor.FLOOR, fns, reps)
  num_params = sum(v.size for v in jax.tree.leaves(params))
  param_bytes = sum(v.nbytes for v in jax.tree.leaves(params))
  return num_params, param_bytes, paired, memory, not_run


def opacus_ghost_call(model_name, batch_size):
  """Opacus' ghost-clipping step at ``os.cpu_count()`` threads, or None
  without torch or opacus."""
  if optional("torch") is None or optional("opacus") is None:
    return None
  import opacus_ghost  # pylint: disable=g-import-not-at-top

  return opacus_ghost.threaded_call(model_name, batch_size, os.cpu_count())


# The one-core comparison times both direction generators against torch.
ONE_CORE_PRNGS = ("threefry", "counter")


def one_core_worker(reps):
  """Child process pinned to one core: JAX dpzero vs the torch port."""
  import torch  # pylint: disable=g-import-not-at-top
  import torch_dpzero  # pylint: disable=g-import-not-at-top

  torch.set_num_threads(1)
  result = {}
  for label, model, shape, (torch_model, _) in settings(include_minilm=False):
    for batch_size in (64, 256):
      batched_loss, params, batch = image_task(model, shape, batch_size)
      fns = {}
      for prng in ONE_CORE_PRNGS:
        step, state = jax_steps.zoprivacy_step(
          dpzero_estimator(prng, batch_size),
          batched_loss,
          params,
          learning_rate=LR,
        )
        fns[f"dpzero ({prng})"] = donated_call(step, params, state, batch)
      t_step, x, y, _ = torch_dpzero.setup(torch_model, batch_size)
      fns[TORCH] = lambda t_step=t_step, x=x, y=y: t_step(x, y)
      times = min_median_round_robin(fns, reps)
      result[f"{label}, batch {batch_size}"] = times
  print(json.dumps(result))


def one_core_section(reps):
  """Runs :func:`one_core_worker` in a child pinned to one CPU core."""
  cpu = min(os.sched_getaffinity(0))
  env = dict(
    os.environ,
    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
  )
  out = subprocess.run(
    [sys.executable, __file__, "--one-core-worker", "--reps", str(reps)],
    env=env,
    capture_output=True,
    text=True,
    check=True,
    preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
  )
  result = json.loads(out.stdout.strip().splitlines()[-1])
  lines = [
    "## One core each: JAX dpzero vs the torch port",
    "",
    f"A child process pinned to CPU {cpu} (`sched_setaffinity`, XLA "
    "intra-op parallelism 1, torch 1 thread); load before: "
    f"{load_str()}; min / median ms of {reps} interleaved calls.",
    "",
    "| setting | "
    + "".join(f"JAX dpzero ({p}) ms | " for p in ONE_CORE_PRNGS)
    + "torch dpzero ms | "
    + "".join(f"torch / JAX {p} (median) | " for p in ONE_CORE_PRNGS).rstrip(),
    "|---|" + "---|" * (1 + 2 * len(ONE_CORE_PRNGS)),
  ]
  for setting, t in result.items():
    tc = t[TORCH]
    jax_times = [t[f"dpzero ({p})"] for p in ONE_CORE_PRNGS]
    lines.append(
      f"| {setting} | "
      + "".join(f"{ms_str(jx)} | " for jx in jax_times)
      + f"{ms_str(tc)} | "
      + "".join(f"{tc[1] / jx[1]:.2f} | " for jx in jax_times).rstrip()
    )
  return lines + [""]


def settings(
  include_minilm=True, minilm_length=64, minilm_weights="pretrained"
):
  """``(label, model, input shape, torch twin)``: MiniLM has model and
  shape None; the twin is ``torch_dpzero.setup``'s model name and keyword
  arguments."""
  out = [
    (
      "digits CNN",
      small.SmallCNN(num_classes=10, features=(8, 16)),
      (8, 8, 1),
      ("cnn", {}),
    ),
    (
      "wide MLP",
      small.MLP(num_classes=10, hidden=(2304, 1024)),
      (28, 28, 1),
      ("mlp", {}),
    ),
  ]
  if include_minilm:
    out.append(
      (
        f"MiniLM-L6 classifier, {minilm_length} tokens"
        + (", random weights" if minilm_weights == "random" else ""),
        None,
        None,
        ("minilm", dict(length=minilm_length, weights=minilm_weights)),
      )
    )
  return out


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="5 calls each")
  parser.add_argument("--reps", type=int, default=None)
  parser.add_argument("--minilm-length", type=int, default=64)
  parser.add_argument("--skip-minilm", action="store_true")
  parser.add_argument(
    "--models",
    default="digits CNN,wide MLP",
    help="comma-separated image models (digits CNN, wide MLP)",
  )
  parser.add_argument("--batch-sizes", default="64,256")
  parser.add_argument(
    "--skip-one-core", action="store_true", help="no one-core table"
  )
  parser.add_argument(
    "--minilm-weights",
    choices=("pretrained", "random"),
    default="pretrained",
    help="random: the same architecture without the checkpoint",
  )
  parser.add_argument("--max-run-gib", type=float, default=6.0)
  parser.add_argument(
    "--jax-privacy-microbatch",
    type=int,
    default=8,
    help="jax_privacy microbatch_size; 0: one vmap over the whole batch",
  )
  parser.add_argument(
    "--one-core-worker", action="store_true", help=argparse.SUPPRESS
  )
  parser.add_argument(
    "--out", default=os.path.join(HERE, "results", "peers.md")
  )
  args = parser.parse_args()
  reps = args.reps or (5 if args.quick else 20)
  if args.one_core_worker:
    one_core_worker(reps)
    return
  device = jax.devices()[0]
  flags = " --quick" if args.quick else ""
  if args.minilm_weights == "random":
    flags += " --minilm-weights random"
  if args.max_run_gib != parser.get_default("max_run_gib"):
    flags += f" --max-run-gib {args.max_run_gib:g}"
  for name in ("models", "batch_sizes"):
    if getattr(args, name) != parser.get_default(name):
      flags += f" --{name.replace('_', '-')} '{getattr(args, name)}'"
  for name in ("skip_minilm", "skip_one_core"):
    if getattr(args, name):
      flags += f" --{name.replace('_', '-')}"
  lines = [
    "# One private training step: zoprivacy DPZero vs first-order DP peers",
    "",
    f"Command: `python benchmarks/peers.py{flags}`  ",
    f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, device "
    f"{device.platform} ({device.device_kind}); {versions()}; load before "
    f"the run (1/5/15 min): {load_str()}.  ",
    f"Each time: min / median ms of {reps} interleaved calls after two "
    "warm-up calls (calls over 1 s: 3 calls); parameters and optimizer "
    "state donated. Peak: compiled arguments + outputs + temporaries - "
    "aliased (JAX); parameters + batch + resident growth over one step "
    "(torch). Clip 1, noise multiplier 1, SGD lr 1e-3; the default row is "
    "dpzero with no direction option (sphere, 'auto'), the other dpzero "
    "rows Gaussian directions.",
    "",
  ]
  results = {}
  max_run = args.max_run_gib * 2**30
  chosen = args.models.split(",")
  for label, model, shape, torch_twin in settings(
    not args.skip_minilm, args.minilm_length, args.minilm_weights
  ):
    if model is not None and label not in chosen:
      continue
    for batch_size in map(int, args.batch_sizes.split(",")):
      if model is None:
        task = minilm_task(batch_size, args.minilm_length, args.minilm_weights)
      else:
        task = image_task(model, shape, batch_size)
      n, pb, t, mem, not_run = bench(
        task,
        torch_twin,
        batch_size,
        reps,
        max_run,
        args.jax_privacy_microbatch,
      )
      title = f"{label}, batch {batch_size}"
      lines += setting_lines(title, n, pb, t, mem, not_run)
      results[title] = (t.times, mem, model is None)
      print("\n".join(lines[-(len(ORDER) + 8) :]), flush=True)
      write_report(args.out, lines)  # what a stopped run has measured
  lines += target_lines(results)
  if optional("torch") is None:
    lines += ["torch is not installed: no torch lines, no one-core table.", ""]
  elif device.platform == "cpu" and not args.skip_one_core:  # core for core
    lines += one_core_section(reps)
  print("\n".join(lines[-20:]), flush=True)
  write_report(args.out, lines)
  print(f"wrote {args.out}")


if __name__ == "__main__":
  main()
