"""Which structure of a two-point step XLA compiles to the lowest peak memory.

Compiled peak (``memory_analysis()``: arguments + outputs + temporaries -
aliased) of one zeroth-order step at batch 64, as a multiple of the
parameter bytes, on the wide MLP (4.2M parameters) and the all-MiniLM-L6-v2
classifier (22.6M parameters, 64 tokens; ``--skip-minilm`` leaves it out):

* ``forward``: one forward pass computing the loss (the reference);
* ``dpzero`` (the library's generic step + ``optax.sgd``) with each
  direction generator, with and without donating the parameters;
* on the MLP, hand-written variants of the counter-hash Rademacher step:
  both perturbations written from ``x`` with no ordering, the two passes
  in a ``lax.map`` over the signs, and the update alone.

Nothing runs: every figure is read from the compiled executable (about
7 minutes of compilation on 2 CPU cores, most of it MiniLM). Writes
``benchmarks/results/step_memory.md``.
"""

from __future__ import annotations

import argparse
import os
import platform

import jax
import jax.numpy as jnp
import numpy as np
import optax
from exact_noise_cost import models
from results_file import write_report
from timing import peak_bytes

import zoprivacy
from zoprivacy.zo import counter_hash

SMOOTHING, LEARNING_RATE = 1e-3, 1e-3


def _perturb(params, key, scale):
  """``x + scale * u`` with the counter-hash Rademacher ``u``, leaf ``i``
  drawn from ``(key, i)`` (the library's numbering)."""
  leaves, treedef = jax.tree.flatten(params)
  return treedef.unflatten(
    [
      x
      + scale
      * counter_hash.to_rademacher(
        counter_hash.leaf_bits(key, i, x.shape), x.dtype
      )
      for i, x in enumerate(leaves)
    ]
  )


def variants(loss, batch_size):
  """``{name: (step, donate_argnums, uses_estimator_state)}``."""

  def estimator_step(directions, prng):
    tx = optax.chain(
      zoprivacy.dpzero(
        clip=1.0,
        noise_multiplier=1.0,
        smoothing=SMOOTHING,
        expected_batch_size=batch_size,
        directions=directions,
        direction_prng=prng,
      ),
      optax.sgd(LEARNING_RATE),
    )

    def step(p, s, b, m):
      zeros = jax.tree.map(jnp.zeros_like, p)
      updates, s = tx.update(zeros, s, p, batched_loss=loss, batch=b, mask=m)
      return optax.apply_updates(p, updates), s

    return tx, step

  def scalar(f_plus, f_minus):
    return jnp.mean(jnp.clip((f_plus - f_minus) / (2 * SMOOTHING), -1, 1))

  def from_x(p, key, b):  # both perturbations written from x
    f_plus = loss(_perturb(p, key, SMOOTHING), b)
    f_minus = loss(_perturb(p, key, -SMOOTHING), b)
    return _perturb(p, key, -LEARNING_RATE * scalar(f_plus, f_minus))

  def mapped(p, key, b):  # the two passes as a loop over the signs
    f = jax.lax.map(
      lambda sign: loss(_perturb(p, key, sign * SMOOTHING), b),
      jnp.array([1.0, -1.0]),
    )
    return _perturb(p, key, -LEARNING_RATE * scalar(f[0], f[1]))

  def update_only(p, key, g):
    return _perturb(p, key, -LEARNING_RATE * g)

  out = {}
  for label, directions, prng in (
    ("gaussian/threefry", "gaussian", "threefry"),
    ("gaussian/counter", "gaussian", "counter"),
    ("sphere/counter", "sphere", "counter"),
    ("rademacher/counter", "rademacher", "counter"),
  ):
    tx, step = estimator_step(directions, prng)
    out[f"dpzero {label}"] = ("estimator", step, tx, ())
    out[f"dpzero {label}, donated"] = ("estimator", step, tx, (0, 1))
  out["hand-written: both perturbations from x, donated"] = (
    "key",
    from_x,
    None,
    (0,),
  )
  out["hand-written: lax.map over the two signs, donated"] = (
    "key",
    mapped,
    None,
    (0,),
  )
  out["the update x - a g u alone, donated"] = (
    "scalar",
    update_only,
    None,
    (0,),
  )
  return out


def mlp_setting(batch_size):
  """``(loss, params, batch)`` of the wide MLP."""
  model, shape = models()["wide MLP"]
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(batch_size, *shape)).astype(np.float32))
  y = jnp.asarray(rng.integers(0, 10, size=batch_size).astype(np.int32))
  params = model.init(jax.random.key(0), x[:1])

  def loss(p, b):
    logits = model.apply(p, b[0])
    return optax.softmax_cross_entropy_with_integer_labels(logits, b[1])

  return loss, params, (x, y)


def measure(loss, params, batch, batch_size, hand_written=True):
  mask = jnp.ones(batch_size, bool)
  rows = {"forward": peak_bytes(jax.jit(loss), params, batch)}
  key = jax.random.key(1)
  for name, (kind, step, tx, donate) in variants(loss, batch_size).items():
    if kind != "estimator" and not hand_written:
      continue
    jitted = jax.jit(step, donate_argnums=donate)
    if kind == "estimator":
      args = (params, zoprivacy.init(tx, params), batch, mask)
    elif kind == "key":
      args = (params, key, batch)
    else:
      args = (params, key, jnp.float32(0.5))
    rows[name] = peak_bytes(jitted, *args)
  return rows


def table(title, param_bytes, rows):
  forward = rows["forward"]
  largest = rows.pop("largest leaf")
  lines = [
    f"## {title}: {param_bytes / 2**20:.1f} MiB of float32 parameters "
    f"(largest leaf {largest / param_bytes:.2f}x)",
    "",
    "| structure | peak MiB | peak / params | (peak - forward) / params |",
    "|---|---|---|---|",
  ]
  for name, peak in rows.items():
    lines.append(
      f"| {name} | {peak / 2**20:.1f} | {peak / param_bytes:.2f} | "
      f"{(peak - forward) / param_bytes:.2f} |"
    )
  return lines + [""]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--out",
    default=os.path.join(
      os.path.dirname(__file__), "results", "step_memory.md"
    ),
  )
  parser.add_argument("--skip-minilm", action="store_true")
  parser.add_argument(
    "--minilm-weights",
    choices=("pretrained", "random"),
    default="pretrained",
    help="random: the same architecture without the checkpoint",
  )
  args = parser.parse_args()
  batch_size = 64
  device = jax.devices()[0]
  lines = [
    "# Compiled peak memory of one zeroth-order step, by structure",
    "",
    "Command: `python benchmarks/step_memory.py"
    + (" --skip-minilm" if args.skip_minilm else "")
    + (" --minilm-weights random" if args.minilm_weights == "random" else "")
    + "`  ",
    f"Machine: {platform.machine()}, device {device.platform} "
    f"({device.device_kind}), jax {jax.__version__}.  ",
    f"Batch {batch_size}. Peak = arguments + outputs + temporaries - "
    "aliased, from `jax.jit(f).lower(...).compile().memory_analysis()`. "
    "Target: peak - forward <= 1.0x the parameters (at most 2.0x the "
    "parameters plus the forward's activations), 0.5x at best.",
    "",
  ]
  settings = [("wide MLP", *mlp_setting(batch_size), True)]
  if not args.skip_minilm:
    from peers import minilm_task  # pylint: disable=g-import-not-at-top

    settings.append(
      (
        "MiniLM-L6 classifier, 64 tokens",
        *minilm_task(batch_size, 64, args.minilm_weights),
        False,
      )
    )
  for title, loss, params, batch, hand_written in settings:
    param_bytes = sum(v.nbytes for v in jax.tree.leaves(params))
    rows = measure(loss, params, batch, batch_size, hand_written)
    rows["largest leaf"] = max(v.nbytes for v in jax.tree.leaves(params))
    lines += table(title, param_bytes, rows)
    print("\n".join(lines), flush=True)
    write_report(args.out, lines)  # what a stopped run has measured


if __name__ == "__main__":
  main()
