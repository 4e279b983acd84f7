r"""What a step of the SmolLM2 VADER task costs, by what it trains.

    python benchmarks/vader_llm_cost.py                 # every variant
    python benchmarks/vader_llm_cost.py --variants lora:1,prefix:1 --reps 3

For each variant ``peft:trained_blocks`` (``lora``, ``prefix`` or ``full``;
the top ``trained_blocks`` of the 30 blocks), the runner's own jitted step
(``experiments.run.resolved_run.setup`` + ``experiments.run.step.make_step``: DP-ZO
with Gaussian directions, Poisson batches of expected size 32 padded to
their capacity of 72 rows, exact discrete noise) is timed after its
compiling call, on the public proxy's data (the same shapes as the private
run; no private example is read), with the frozen blocks' states from the
state cache (computed first if absent). ``--dtypes`` also times the whole
model's forward pass at 32 prompts x 32 tokens in float32 against
bfloat16 (weights and compute), interleaved.

Prints a Markdown table; the SmolLM2 results file quotes it.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from timing import min_median_round_robin

from configs import vader_smollm2
from experiments import tasks
from experiments.run import resolution
from experiments.run import step as step_lib
from experiments.run.resolved_run import setup
from experiments.tasks.vader_llm import load_model
from zoprivacy.models import peft
from zoprivacy.models.llama import LlamaForCausalLM

VARIANTS = ("lora:1", "prefix:1", "full:1", "lora:2", "lora:4", "lora:30")
VARIANTS += ("prefix:30", "full:30")


def _config(mode: str, blocks: int):
  c = vader_smollm2.get_config()
  c.peft, c.trained_blocks = mode, blocks
  c.public, c.public_proxy = "amazon+tweets", True
  c.num_steps, c.eval_every = 1000, 0
  return c


def time_variant(mode: str, blocks: int, reps: int) -> dict:
  """Seconds per step (min, median over ``reps`` after the compiling one)
  and the number of trained parameters."""
  config = _config(mode, blocks)
  task = tasks.get_task(config)
  run = setup(*resolution.resolve(config), task=task)
  step = step_lib.make_step(run)
  state = dict(run.initial_state)
  trained = peft.num_params(state["params"])
  times = []
  for t in range(reps + 1):
    batch, public, noise = step_lib.step_inputs(run, t)
    start = time.perf_counter()
    state["params"], state["opt_state"] = step(
      state["params"], run.frozen, state["opt_state"], batch, public, noise
    )
    jax.block_until_ready(state["params"])
    if t:  # the first call compiles
      times.append(time.perf_counter() - start)
  return {"trained": trained, "min": min(times), "median": np.median(times)}


def time_dtypes(reps: int) -> dict:
  """The whole model's forward, float32 against bfloat16, interleaved."""
  config, params, _, _ = load_model(_config("lora", 1))
  ids = jnp.asarray(np.random.default_rng(0).integers(100, 40000, (32, 32)))
  last = jnp.full((32, 1), 31)
  fns = {}
  for name, dtype in (("float32", jnp.float32), ("bfloat16", jnp.bfloat16)):
    model = LlamaForCausalLM(config, dtype=dtype, param_dtype=dtype)
    p = jax.tree.map(lambda x, d=dtype: x.astype(d), params)
    f = jax.jit(lambda p, i, m=model: m.apply({"params": p}, i, None, last))
    fns[name] = lambda f=f, p=p: f(p, ids)
  return min_median_round_robin(fns, reps, slow_call_seconds=1e9)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--variants", default=",".join(VARIANTS))
  parser.add_argument("--reps", type=int, default=3)
  parser.add_argument("--dtypes", action="store_true")
  args = parser.parse_args(argv)
  print(f"load {os.getloadavg()}, jax {jax.__version__}", flush=True)
  print("| trained | blocks | parameters | s / step (min / median) |")
  print("|---|---|---|---|", flush=True)
  for variant in args.variants.split(","):
    mode, blocks = variant.split(":")
    r = time_variant(mode, int(blocks), args.reps)
    print(
      f"| {mode} | {blocks} | {r['trained']:,} | {r['min']:.2f} / "
      f"{r['median']:.2f} |",
      flush=True,
    )
  if args.dtypes:
    t = time_dtypes(args.reps)
    print(
      "forward, 32 x 32 tokens, s (min, median): "
      + ", ".join(f"{k} {v[0]:.2f} / {v[1]:.2f}" for k, v in t.items())
    )
  print(f"load {os.getloadavg()}")


if __name__ == "__main__":
  main()
