r"""Where the default dpzero step's time goes, part by part, against its
floor.

    python benchmarks/step_profile.py [--quick] [--batch-size 64]

On the wide MLP, every program timed right after a call of the floor
(``floor.py``: two plain forward passes and one donated update pass, one
compiled program), so each has a floor call beside it under the same load.

The default step (``zoprivacy.dpzero`` with no direction or noise option:
sphere directions drawn by the counter hash 'auto' picks, exact noise drawn
by the update itself, ``make_step``, donated) is decomposed in place: a
chain of whole steps, each adding one part to the one before (:data:`STEPS`,
:data:`PARTS`): two forwards alone; the floor; mezo with Gaussian
directions whose draw is made near free (the hash replaced by one multiply
and an xor, the Gaussian transform by an integer-to-float scaling: not
directions anyone should use, but the step's structure kept), which adds
forming ``x +- l u``, the blocked products and the update's own pass; the
same with sphere directions (the norm pass's structure); the real draws;
clipping and float noise; exact noise given as an argument (the
quantization); and the default, which draws its exact noise on the host
through a callback (the fetch). Each part is a difference of the steps'
paired ratios to the floor.

A second table times the default's parts jitted alone (the two passes as
the step runs them, the update ``x - a s u``, the sphere's norm pass, ``u``
drawn alone), and a third the draw of 4.18M values alone: the hash to a
uniform, each counter hash's Gaussian, and a log-free inverse CDF on the
central region (an odd polynomial in ``s`` for ``|s| <= 0.8``, 2.9e-7
relative) with the exact transform selected for the other lanes: compiled
for a CPU's vector units, a select evaluates both sides on every lane.

Each figure is min / median in wall time and in this process's CPU time
(both threads of XLA's pool): on a shared machine the CPU time is the
steadier measure of the work.
"""

from __future__ import annotations

import argparse
import contextlib
import os

import draw_cost
import floor
import jax
import jax.numpy as jnp
import numpy as np
import optax
from exact_noise_cost import models
from timing import paired_round_robin

import zoprivacy
from zoprivacy.estimators import two_point
from zoprivacy.zo import (
  counter_directions,
  counter_hash,
  directions,
  queries,
)

SMOOTHING = 1e-3


def _one_multiply_bits(key, leaf, positions):
  """A near-free stand-in for a hash's ``bits`` (what-if rows only)."""
  k0, _ = counter_hash.key_words(key)
  i = positions.astype(jnp.uint32)
  return (i * np.uint32(0x9E3779B9)) ^ k0 ^ jnp.asarray(leaf, jnp.uint32)


def _scaled_words(words, dtype):
  """A near-free stand-in for ``to_gaussian`` (what-if rows only)."""
  m = (words >> 9).astype(jnp.int32) - 2**22
  return (m.astype(jnp.float32) * np.float32(2.0**-21)).astype(dtype)


@contextlib.contextmanager
def _generator(module, bits, transform):
  """Traces inside use ``bits`` and ``transform`` for ``module``'s draws."""
  saved = module.bits, module.to_gaussian
  module.bits, module.to_gaussian = bits, transform
  try:
    yield
  finally:
    module.bits, module.to_gaussian = saved


def _setup(batch_size):
  model, shape = models()["wide MLP"]
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(batch_size,) + shape).astype(np.float32))
  y = jnp.asarray(rng.integers(0, 10, size=batch_size).astype(np.int32))
  params = model.init(jax.random.key(0), x[:1])

  def loss(p, b):
    return optax.softmax_cross_entropy_with_integer_labels(
      model.apply(p, b[0]), b[1]
    )

  return params, (x, y), loss


def _estimator(name, batch_size, noise):
  """mezo (``noise=None``) or dpzero with ``name`` directions, 'auto'."""
  if noise is None:
    return zoprivacy.mezo(smoothing=SMOOTHING, directions=name)
  return zoprivacy.dpzero(
    clip=1.0,
    noise_multiplier=1.0,
    smoothing=SMOOTHING,
    expected_batch_size=batch_size,
    directions=name,
    noise=noise,
  )


def _donated_step(params, batch, loss, est, noise_given=False):
  """A zero-argument call of ``make_step``'s donated step, carrying state;
  ``noise_given``: exact noise drawn once beforehand and passed as
  ``discrete_noise=`` (the runner's path, the draw not timed)."""
  tx = optax.chain(est, optax.sgd(1e-3))
  step = zoprivacy.make_step(tx, loss)
  held = {"p": jax.tree.map(jnp.copy, params), "s": tx.init(params)}
  extra = {}
  if noise_given:
    source = zoprivacy.ExactNoiseSource.for_state(held["s"])
    extra["discrete_noise"] = jnp.asarray(source.draw_now(0))

  def call():
    held["p"], held["s"] = step(held["p"], held["s"], batch, **extra)
    return held["p"]

  jax.block_until_ready(call())  # traced (and compiled) here
  return call


# The whole-step programs of the in-place decomposition, cheapest first:
# (label, directions, noise (None: mezo), near-free draw, noise given).
STEPS = (
  ("mezo, Gaussian, draw near free", "gaussian", None, True, False),
  ("mezo, sphere, draw near free", "sphere", None, True, False),
  ("mezo, Gaussian", "gaussian", None, False, False),
  ("mezo, sphere", "sphere", None, False, False),
  ("dpzero, sphere, float noise", "sphere", "float", False, False),
  ("dpzero, sphere, exact noise given", "sphere", "exact", False, True),
  (
    "dpzero default (sphere, exact noise drawn by the update)",
    "sphere",
    "exact",
    False,
    False,
  ),
)
DEFAULT_STEP = STEPS[-1][0]
TWO_FORWARDS = "two forwards (one program, no update)"

# The default step part by part: (part, what it adds, minuend, subtrahend);
# each part is a difference of medians of paired ratios to the floor.
PARTS = (
  ("the two forwards", TWO_FORWARDS, None),
  ("the floor's update pass", floor.FLOOR, TWO_FORWARDS),
  (
    "forming x +- l u, the blocked products, the update's own pass "
    "(draw near free)",
    STEPS[0][0],
    floor.FLOOR,
  ),
  ("the sphere's norm pass, draw near free", STEPS[1][0], STEPS[0][0]),
  ("two draws of u (the passes', the update's)", STEPS[2][0], STEPS[0][0]),
  ("the sphere's third draw (its norm)", None, None),
  ("clipping, float noise", STEPS[4][0], STEPS[3][0]),
  ("quantization, exact noise added", STEPS[5][0], STEPS[4][0]),
  ("the exact-noise fetch (host draw, callback)", STEPS[6][0], STEPS[5][0]),
)


def in_place_steps(batch_size):
  """``{name: zero-argument call}``: the floor, two forwards, the
  :data:`STEPS` (wide MLP, ``make_step``, donated)."""
  params, batch, loss = _setup(batch_size)
  two = jax.jit(lambda p, b, b2: (loss(p, b), loss(p, b2)))
  out = {
    floor.FLOOR: floor.floor_call(loss, params, batch),
    TWO_FORWARDS: lambda: two(params, batch, batch),
  }
  generator = directions.COUNTER_GENERATORS[
    directions.generator("auto", params)
  ]
  for label, name, noise, free, given in STEPS:
    est = _estimator(name, batch_size, noise)
    replaced = (_one_multiply_bits, _scaled_words) if free else None
    with _generator(generator, *replaced) if free else contextlib.nullcontext():
      out[label] = _donated_step(params, batch, loss, est, given)
  return out


def alone_parts(batch_size, name="sphere", prng=directions.AUTO_COUNTER):
  """``{part: zero-argument call}``: the default step's parts, each jitted
  alone (``name`` directions drawn by ``prng``)."""
  params, batch, loss = _setup(batch_size)
  query = two_point.make_query(
    directions=name,
    direction_prng=prng,
    smoothing=SMOOTHING,
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
      signs = (SMOOTHING, -SMOOTHING)
      return tuple(leaf + (signs[j] * u).astype(leaf.dtype) for j in lanes)

    return queries.losses_perturbed_at_first_use(loss, p, batch, perturb_both)

  update = jax.jit(
    lambda p, s: two_point.released_update(query, p, keys, s, scales)
  )
  draw = jax.jit(directions.get_sampler(name, prng=prng))
  out = {
    floor.FLOOR: floor.floor_call(loss, params, batch),
    "two passes at x +- l u (as the step: blocks, shared x @ W)": (
      lambda: two_passes(params, key, scale)
    ),
    "update x - a s u (u regenerated)": lambda: update(
      params, jnp.ones([1], jnp.float32)
    ),
    "u drawn alone (materialized)": lambda: draw(key, params),
  }
  if name in directions.SPHERE_RADII:
    norm = jax.jit(
      lambda p: counter_directions.counter_sphere_scale(name, key, p, prng)
    )
    out["sphere norm pass"] = lambda: norm(params)
  return out


def _load():
  return tuple(round(x, 2) for x in os.getloadavg())


def _ms(pair):
  return f"{pair[0] * 1e3:.2f} / {pair[1] * 1e3:.2f}"


def _program_rows(paired):
  """``| program | wall ms | CPU ms | / floor wall | / floor CPU |`` rows."""
  return [
    f"| {k} | {_ms(paired.times[k])} | {_ms(paired.cpu_times[k])} | "
    f"{paired.ratios[k]:.2f} | {paired.cpu_ratios[k]:.2f} |"
    for k in paired.times
  ]


def part_rows(paired):
  """The default step part by part: ``| part | / floor wall | / floor CPU
  | ms |``, each a difference of :data:`PARTS` programs' paired ratios
  (ms at the floor's median wall time)."""

  def part(ratios, plus, minus):
    if plus is None:  # the sphere's third draw
      return (ratios[STEPS[3][0]] - ratios[STEPS[1][0]]) - (
        ratios[STEPS[2][0]] - ratios[STEPS[0][0]]
      )
    return ratios[plus] - (0.0 if minus is None else ratios[minus])

  base = paired.times[floor.FLOOR][1]
  rows = []
  for label, plus, minus in PARTS:
    wall = part(paired.ratios, plus, minus)
    cpu = part(paired.cpu_ratios, plus, minus)
    rows.append(
      f"| {label} | {wall:.2f} | {cpu:.2f} | {wall * base * 1e3:.2f} |"
    )
  total = paired.ratios[DEFAULT_STEP], paired.cpu_ratios[DEFAULT_STEP]
  rows.append(
    f"| **the default step** | **{total[0]:.2f}** | **{total[1]:.2f}** | "
    f"{total[0] * base * 1e3:.2f} |"
  )
  return rows


def profile_section(reps, batch_size=64):
  load = _load()
  steps = paired_round_robin(floor.FLOOR, in_place_steps(batch_size), reps)
  lines = [
    f"## Profile: the default step part by part (wide MLP, batch {batch_size})",
    "",
    "`python benchmarks/step_profile.py`: whole programs, each called "
    "right after a call of the floor (floor, a, floor, b, ...), "
    f"{reps} rounds; min / median ms in wall time and in this process's "
    "CPU time; `/ floor` is the median over calls of each call's time "
    "over the floor call's just before it. Every step is `make_step`'s "
    f"(donated), directions 'auto'. Load before: {load}.",
    "",
    "| program | wall ms | CPU ms | / floor, wall | / floor, CPU |",
    "|---|---|---|---|---|",
    *_program_rows(steps),
    "",
    "The default step part by part: each part is the difference of two "
    "programs above (what one adds to the other), as a multiple of the "
    "floor; ms at the floor's median. The draw made near free replaces "
    "the hash by one multiply and an xor and the Gaussian transform by an "
    "integer-to-float scaling (not directions; the step's structure "
    "kept).",
    "",
    "| part | / floor, wall | / floor, CPU | ms |",
    "|---|---|---|---|",
    *part_rows(steps),
    "",
  ]
  alone = paired_round_robin(floor.FLOOR, alone_parts(batch_size), reps)
  lines += [
    "The default step's parts jitted alone (they overlap inside the step, "
    "where XLA fuses each draw into its use), same pairing:",
    "",
    "| program | wall ms | CPU ms | / floor, wall | / floor, CPU |",
    "|---|---|---|---|---|",
    *_program_rows(alone),
  ]
  times = draw_cost.min_median_wall_and_cpu(draw_cost.draws(), reps)
  lines += [
    "",
    f"The draw alone, 4,179,210 values (load {_load()}):",
    "",
    "| draw | wall ms | CPU ms |",
    "|---|---|---|",
  ]
  for label, t in times.items():
    lines.append(f"| {label} | {_ms(t[:2])} | {_ms(t[2:])} |")
  lines.append(f"\nLoad after: {_load()}.\n")
  return lines


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--batch-size", type=int, default=64)
  args = parser.parse_args()
  print("\n".join(profile_section(5 if args.quick else 21, args.batch_size)))


if __name__ == "__main__":
  main()
