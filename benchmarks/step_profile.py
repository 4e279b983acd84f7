r"""Where the default dpzero step's time goes, part by part.

    python benchmarks/step_profile.py [--quick] [--batch-size 64]

On the wide MLP, side by side in one run (round-robin after warm-up), each
part jitted alone, with the counter hash the default draws with
(``direction_prng='auto'``: ``'counter2'`` on this model): one forward
pass; the floor's update pass (``p a + b`` over the donated parameters);
the two passes at ``x +- l u`` as the step evaluates them (side by side,
each leaf perturbed at its first use, a large kernel's row blocks drawn
once for both, the first kernel's ``x @ W`` shared); the same two passes
with one plain product per layer (``u`` drawn whole first and ``x +- l u``
materialized: the structure without row blocks, at two parameter copies);
the sphere's norm pass; the update ``x - a s u`` (regenerating ``u``);
``u`` drawn alone (materialized); and the whole step (``make_step``,
donated), also with the first counter hash.

Two what-if rows bound what a cheaper generator could give: the whole
step traced with the hash replaced by one multiply and an xor (``words = i
* phi ^ key``), and with that and the Gaussian transform replaced by a
plain integer-to-float scaling. They are not directions anyone should use
(the words are a permutation of the counter and the values uniform, not
Gaussian); they keep the step's structure, so the second is the step's time
with a draw that costs almost nothing.

A second table times the draw of 4.18M values alone: the hash to a
uniform, each counter hash's Gaussian, and a log-free inverse CDF on the
central region (an odd polynomial in ``s`` for ``|s| <= 0.8``, 2.9e-7
relative) with the exact transform selected for the other lanes: compiled
for a CPU's vector units, a select evaluates both sides on every lane.

Each figure is min / median of interleaved calls in wall time and in this
process's CPU time (both threads of XLA's pool): on a shared machine the
CPU time is the steadier measure of the work.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from exact_noise_cost import models

import zoprivacy
from zoprivacy.estimators import two_point
from zoprivacy.zo import (
  counter_directions,
  counter_hash,
  counter_hash2,
  directions,
  queries,
)

SMOOTHING = 1e-3
# sqrt(2) erfinv(s) / s = P(s^2) for |s| <= 0.8, degree 8, lowest first
# (2.9e-7 relative in float32): the log-free central region.
_CENTRAL = (
  1.2533143758773804,
  0.3280530571937561,
  0.18287989497184753,
  0.08542689681053162,
  0.36278975009918213,
  -1.0138065814971924,
  2.512296676635742,
  -2.904970407485962,
  1.5801717042922974,
)


def _one_multiply_bits(key, leaf, positions):
  """A near-free stand-in for a hash's ``bits`` (what-if rows only)."""
  k0, _ = counter_hash.key_words(key)
  i = positions.astype(jnp.uint32)
  return (i * np.uint32(0x9E3779B9)) ^ k0 ^ jnp.asarray(leaf, jnp.uint32)


def _scaled_words(words, dtype):
  """A near-free stand-in for ``to_gaussian`` (what-if rows only)."""
  m = (words >> 9).astype(jnp.int32) - 2**22
  return (m.astype(jnp.float32) * np.float32(2.0**-21)).astype(dtype)


def _central_or_exact(words, dtype):
  """The log-free central polynomial where ``|s| <= 0.8``, the second
  hash's exact transform elsewhere, selected per element."""
  m = (words >> 9).astype(jnp.int32).astype(jnp.float32)
  s = m * np.float32(2.0**-22) + np.float32(2.0**-23 - 1.0)
  central = s * counter_hash._horner(_CENTRAL, s * s)
  exact = counter_hash2.normal_quantile_on_grid(s)
  return jnp.where(jnp.abs(s) <= 0.8, central, exact).astype(dtype)


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


def _donated_step(params, batch, loss, name, prng):
  """A zero-argument call of ``make_step``'s donated step, carrying state."""
  tx = optax.chain(
    zoprivacy.dpzero(
      clip=1.0,
      noise_multiplier=1.0,
      smoothing=SMOOTHING,
      expected_batch_size=batch[0].shape[0],
      directions=name,
      direction_prng=prng,
    ),
    optax.sgd(1e-3),
  )
  step = zoprivacy.make_step(tx, loss)
  held = {"p": jax.tree.map(jnp.copy, params), "s": tx.init(params)}

  def call():
    held["p"], held["s"] = step(held["p"], held["s"], batch)
    return held["p"]

  jax.block_until_ready(call())  # traced (and compiled) here
  return call


def _floor_update(params):
  """The floor's second part: ``p a + b`` over the donated parameters."""
  update = jax.jit(
    lambda p, a: jax.tree.map(lambda x: x * a + np.float32(1e-9), p),
    donate_argnums=0,
  )
  held = {"p": jax.tree.map(jnp.copy, params)}

  def call():
    held["p"] = update(held["p"], np.float32(0.999999))
    return held["p"]

  return call


def parts(batch_size, name, prng=directions.AUTO_COUNTER):
  """``{part: zero-argument call}`` for directions ``name``."""
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
  sampler = directions.get_sampler(name, prng=prng)

  @jax.jit
  def two_passes(p, k, sc):
    leaf_u = query.leaf_directions(p)(k, sc)

    def perturb_both(i, leaf, after, lanes, start=0):
      u = leaf_u(i, after, start=start, shape=jnp.shape(leaf))
      signs = (SMOOTHING, -SMOOTHING)
      return tuple(leaf + (signs[j] * u).astype(leaf.dtype) for j in lanes)

    return queries.losses_perturbed_at_first_use(loss, p, batch, perturb_both)

  plain = jax.jit(
    lambda p, k: queries.two_point_losses(
      loss, p, sampler(k, p), SMOOTHING, batch
    )
  )
  update = jax.jit(
    lambda p, s: two_point.released_update(query, p, keys, s, scales)
  )
  forward, draw = jax.jit(loss), jax.jit(sampler)
  out = {
    "forward": lambda: forward(params, batch),
    "floor's update pass (donated p a + b)": _floor_update(params),
    "two passes (as the step: blocks, shared x @ W)": lambda: two_passes(
      params, key, scale
    ),
    "two passes, one plain product per layer (u whole)": lambda: plain(
      params, key
    ),
    "update x - a s u": lambda: update(params, jnp.ones([1], jnp.float32)),
    "u drawn alone (materialized)": lambda: draw(key, params),
    "whole dpzero step (donated)": _donated_step(
      params, batch, loss, name, prng
    ),
    "whole step, first counter hash": _donated_step(
      params, batch, loss, name, "counter"
    ),
  }
  hash_module = directions.COUNTER_GENERATORS[prng]
  for label, replaced in (
    ("hash = one multiply", (_one_multiply_bits, hash_module.to_gaussian)),
    ("hash and transform near free", (_one_multiply_bits, _scaled_words)),
  ):
    with _generator(hash_module, *replaced):
      out[f"what-if: whole step, {label}"] = _donated_step(
        params, batch, loss, name, prng
      )
  if name in directions.SPHERE_RADII:
    norm = jax.jit(
      lambda p: counter_directions.counter_sphere_scale(name, key, p, prng)
    )
    out["sphere norm pass"] = lambda: norm(params)
  return out


def draws(size=4_179_210):
  """``{transform: zero-argument call}``: ``size`` values drawn alone."""
  key = jax.random.key(1)
  rows = (size // 128, 128)

  def drawn(bits, transform):
    f = jax.jit(lambda k: transform(bits(k, 0, _positions(rows)), jnp.float32))
    return lambda: f(key)

  uniform = lambda w, dtype: counter_hash.to_uniform(w)
  return {
    "second hash -> uniform (no transform)": drawn(counter_hash2.bits, uniform),
    "first hash -> Gaussian ('counter')": drawn(
      counter_hash.bits, counter_hash.to_gaussian
    ),
    "second hash -> Gaussian ('counter2')": drawn(
      counter_hash2.bits, counter_hash2.to_gaussian
    ),
    "second hash -> log-free central, exact tails (select)": drawn(
      counter_hash2.bits, _central_or_exact
    ),
  }


def _positions(shape):
  return jax.lax.iota(jnp.uint32, shape[0] * shape[1]).reshape(shape)


def min_median_wall_and_cpu(fns, reps):
  """``{name: (wall min, wall median, cpu min, cpu median)}`` seconds over
  ``reps`` interleaved rounds after two warm-up calls each."""
  for f in fns.values():
    jax.block_until_ready(f())
    jax.block_until_ready(f())
  wall = {k: [] for k in fns}
  cpu = {k: [] for k in fns}
  for _ in range(reps):
    for k, f in fns.items():
      c0, t0 = time.process_time(), time.perf_counter()
      jax.block_until_ready(f())
      wall[k].append(time.perf_counter() - t0)
      cpu[k].append(time.process_time() - c0)
  return {
    k: (
      min(wall[k]),
      statistics.median(wall[k]),
      min(cpu[k]),
      statistics.median(cpu[k]),
    )
    for k in fns
  }


def _load():
  return tuple(round(x, 2) for x in os.getloadavg())


def _row(label, t, floor):
  ms = lambda a, b: f"{a * 1e3:.2f} / {b * 1e3:.2f}"
  return (
    f"| {label} | {ms(t[0], t[1])} | {ms(t[2], t[3])} | "
    f"{t[1] / floor[0]:.2f} | {t[3] / floor[1]:.2f} |"
  )


def profile_section(reps, batch_size=64):
  lines = [
    f"## Profile: where the default step's time goes (wide MLP, batch "
    f"{batch_size})",
    "",
    "`python benchmarks/step_profile.py`: each part jitted alone, side by "
    f"side, min / median ms of {reps} interleaved calls, wall time and "
    "this process's CPU time; the floor is two forwards plus the update "
    f"pass (medians). Load before: {_load()}. The parts overlap inside "
    "the step (XLA fuses each draw into its use), so they need not sum "
    "to it.",
    "",
    "| directions | part | wall ms | CPU ms | / floor, wall | / floor, CPU |",
    "|---|---|---|---|---|---|",
  ]
  for name in ("gaussian", "sphere"):
    times = min_median_wall_and_cpu(parts(batch_size, name), reps)
    fwd, upd = times["forward"], times["floor's update pass (donated p a + b)"]
    floor = (2 * fwd[1] + upd[1], 2 * fwd[3] + upd[3])
    lines += [f"| {name} {_row(part, t, floor)}" for part, t in times.items()]
  times = min_median_wall_and_cpu(draws(), reps)
  lines += [
    "",
    f"The draw alone, 4,179,210 values (load {_load()}):",
    "",
    "| draw | wall ms | CPU ms |",
    "|---|---|---|",
  ]
  for label, t in times.items():
    lines.append(
      f"| {label} | {t[0] * 1e3:.2f} / {t[1] * 1e3:.2f} | "
      f"{t[2] * 1e3:.2f} / {t[3] * 1e3:.2f} |"
    )
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
