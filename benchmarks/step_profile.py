r"""Where a counter-hash dpzero step's time goes, part by part.

    python benchmarks/step_profile.py [--quick] [--batch-size 64]

On the wide MLP, side by side in one run (round-robin, min and median),
each part jitted alone: one forward pass; the two passes at ``x +- l u``
as the step evaluates them (side by side, each leaf perturbed at its
first use, a large kernel's row blocks drawn once for both); the sphere's
norm pass; the update ``x - a s u`` (regenerating ``u``); the whole step
(not donated); and ``u`` drawn alone (materialized). Printed as a Markdown section that
``step_cost.py --profile`` appends to its results file.

Two what-if rows bound what a cheaper generator could give: the whole
step traced with the counter hash replaced by one multiply and an xor
(``words = i * phi ^ key``), and with that and the Gaussian transform
replaced by a plain integer-to-float scaling. They are not directions
anyone should use (the words are a permutation of the counter and the
values uniform, not Gaussian); they keep the step's structure, so the
second is the step's time with a draw that costs almost nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
from exact_noise_cost import models
from timing import min_median_round_robin

import zoprivacy
from zoprivacy.estimators import two_point
from zoprivacy.zo import counter_directions, counter_hash, directions, queries


def _one_multiply_bits(key, leaf, positions):
  """A near-free stand-in for ``counter_hash.bits`` (what-if rows only)."""
  k0, _ = counter_hash.key_words(key)
  i = positions.astype(jnp.uint32)
  return (i * np.uint32(0x9E3779B9)) ^ k0 ^ jnp.asarray(leaf, jnp.uint32)


def _scaled_words(words, dtype):
  """A near-free stand-in for ``counter_hash.to_gaussian`` (what-if)."""
  m = (words >> 9).astype(jnp.int32) - 2**22
  return (m.astype(jnp.float32) * np.float32(2.0**-21)).astype(dtype)


@contextlib.contextmanager
def _generator(bits, transform):
  """Traces inside use ``bits`` and ``transform`` for the counter draws."""
  saved = counter_hash.bits, counter_hash.to_gaussian
  counter_hash.bits, counter_hash.to_gaussian = bits, transform
  try:
    yield
  finally:
    counter_hash.bits, counter_hash.to_gaussian = saved


def parts(batch_size, name):
  """``{part: zero-argument call}`` for directions ``name`` (counter)."""
  model, shape = models()["wide MLP"]
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(batch_size,) + shape).astype(np.float32))
  y = jnp.asarray(rng.integers(0, 10, size=batch_size).astype(np.int32))
  params = model.init(jax.random.key(0), x[:1])
  batch = (x, y)

  def loss(p, b):
    return optax.softmax_cross_entropy_with_integer_labels(
      model.apply(p, b[0]), b[1]
    )

  query = two_point.make_query(
    directions=name,
    direction_prng="counter",
    smoothing=1e-3,
    clip_target="finite_difference",
    privacy=None,
  )
  key = jax.random.key(1)
  keys = key[None]
  scales = query.direction_scales(params, keys)
  scale = None if scales is None else scales[0]

  @jax.jit
  def two_passes(p, k, sc):
    leaf_u = query.leaf_directions(p)(k, sc)

    def perturb_both(i, leaf, after, lanes, start=0):
      u = leaf_u(i, after, start=start, shape=jnp.shape(leaf))
      signs = (1e-3, -1e-3)
      return tuple(leaf + (signs[j] * u).astype(leaf.dtype) for j in lanes)

    return queries.losses_perturbed_at_first_use(loss, p, batch, perturb_both)

  forward = jax.jit(loss)
  update = jax.jit(
    lambda p, s: two_point.released_update(query, p, keys, s, scales)
  )
  draw = jax.jit(lambda p: directions.get_sampler(name, prng="counter")(key, p))
  norm = jax.jit(
    lambda p: counter_directions.counter_sphere_scale(name, key, p)
  )
  tx = optax.chain(
    zoprivacy.dpzero(
      clip=1.0,
      noise_multiplier=1.0,
      smoothing=1e-3,
      expected_batch_size=batch_size,
      directions=name,
      direction_prng="counter",
    ),
    optax.sgd(1e-3),
  )
  state = tx.init(params)

  def raw_step(p, s):
    return optax.apply_updates(
      p, tx.update(p, s, p, batched_loss=loss, batch=batch)[0]
    )

  step = jax.jit(raw_step)
  what_if = {}
  for label, replaced in (
    ("hash = one multiply", (_one_multiply_bits, counter_hash.to_gaussian)),
    ("hash and transform near free", (_one_multiply_bits, _scaled_words)),
  ):
    cheap = jax.jit(lambda p, s: raw_step(p, s))  # a trace of its own
    with _generator(*replaced):  # traced (and compiled) here
      jax.block_until_ready(cheap(params, state))
    what_if[f"what-if: whole step, {label}"] = lambda cheap=cheap: cheap(
      params, state
    )
  out = {
    "forward": lambda: forward(params, batch),
    "two passes (perturbed, side by side)": lambda: two_passes(
      params, key, scale
    ),
    "update x - a s u": lambda: update(params, jnp.ones([1], jnp.float32)),
    "u drawn alone (materialized)": lambda: draw(params),
    "whole dpzero step": lambda: step(params, state),
    **what_if,
  }
  if name in directions.SPHERE_RADII:
    out["sphere norm pass"] = lambda: norm(params)
  return out


def profile_section(reps, batch_size=64):
  lines = [
    f"## Profile: where the counter step's time goes (wide MLP, batch "
    f"{batch_size})",
    "",
    "`python benchmarks/step_profile.py`: each part jitted alone, side by "
    f"side, min / median ms of {reps} interleaved calls; load before: "
    f"{tuple(round(x, 2) for x in os.getloadavg())}. The parts overlap "
    "inside the step (XLA fuses the draw into each use), so they need not "
    "sum to it.",
    "",
    "| directions | part | min / median ms | / (2 forward), median |",
    "|---|---|---|---|",
  ]
  for name in ("gaussian", "sphere"):
    times = min_median_round_robin(parts(batch_size, name), reps)
    two = 2 * times["forward"][1]
    for part, t in times.items():
      lines.append(
        f"| {name} | {part} | {t[0] * 1e3:.2f} / {t[1] * 1e3:.2f} | "
        f"{t[1] / two:.2f} |"
      )
  lines.append(
    f"\nLoad after: {tuple(round(x, 2) for x in os.getloadavg())}.\n"
  )
  return lines


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--batch-size", type=int, default=64)
  args = parser.parse_args()
  print("\n".join(profile_section(5 if args.quick else 21, args.batch_size)))


if __name__ == "__main__":
  main()
