"""The draw of a direction alone: 4.18M values (the wide MLP's parameter
count), each transform timed in wall and CPU time (``step_profile.py``'s
third table).

The hash to a uniform, each counter hash's Gaussian, and a log-free
inverse CDF on the central region (an odd polynomial in ``s`` for ``|s| <=
0.8``, 2.9e-7 relative) with the exact transform selected for the other
lanes: compiled for a CPU's vector units, a select evaluates both sides on
every lane.
"""

from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.zo import counter_hash, counter_hash2

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


def _central_or_exact(words, dtype):
  """The log-free central polynomial where ``|s| <= 0.8``, the second
  hash's exact transform elsewhere, selected per element."""
  m = (words >> 9).astype(jnp.int32).astype(jnp.float32)
  s = m * np.float32(2.0**-22) + np.float32(2.0**-23 - 1.0)
  central = s * counter_hash._horner(_CENTRAL, s * s)
  exact = counter_hash2.normal_quantile_on_grid(s)
  return jnp.where(jnp.abs(s) <= 0.8, central, exact).astype(dtype)


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
