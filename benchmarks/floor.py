"""The floor of a zeroth-order step, measured as the step runs: one compiled
program.

A zeroth-order step has to evaluate the batched loss at two points and
write its update into the parameters once. The floor is the least that can
do that, compiled and called as a step is (one jitted program, parameters
donated, one call per step):

* two plain forward passes at the parameters, ``loss(p, batch)`` twice;
* then one in-place pass ``p <- a p + b g`` over every leaf, written into
  the donated buffers, where ``g = sum(loss_1) - sum(loss_2)``: the pass
  reads the two passes' losses, so it runs after them, as a step's update
  runs after its release. ``a = 1`` and ``b = 0`` are runtime arguments,
  so XLA cannot fold the pass away, and the parameters do not drift.

Not in the floor: drawing the direction, forming ``x +- l u``, clipping,
quantization, noise; everything a step does beyond the floor is its own
cost.

XLA merges two identical forward passes in one program into one (common
subexpression elimination; on the CPU ``jax.lax.optimization_barrier``
does not stop it), so the second pass reads the batch through a second
argument, given the same buffer, which XLA cannot know: the compiled
program holds two of each of the forward's products (tested).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

FLOOR, FORWARD = "floor", "forward"


def floor_program(batched_loss):
  """``(params, batch, batch_again, a, b) -> (params * a + b * g, (l1,
  l2))``, jitted with ``params`` donated (module docstring)."""

  def program(params, batch, batch_again, a, b):
    first = batched_loss(params, batch)
    second = batched_loss(params, batch_again)
    g = jnp.sum(first) - jnp.sum(second)
    updated = jax.tree.map(
      lambda x: x * a.astype(x.dtype) + (b * g).astype(x.dtype), params
    )
    return updated, (first, second)

  return jax.jit(program, donate_argnums=0)


def floor_call(batched_loss, params, batch):
  """A zero-argument call of :func:`floor_program` on its own copy of
  ``params`` (each call donates the previous call's output)."""
  program = floor_program(batched_loss)
  held = [jax.tree.map(jnp.copy, params)]
  a, b = jnp.float32(1.0), jnp.float32(0.0)

  def call():
    held[0], _ = program(held[0], batch, batch, a, b)
    return held[0]

  return call


def floor_calls(batched_loss, params, batch) -> dict:
  """``{FLOOR: call, FORWARD: call}`` to time beside the steps (one
  forward pass alone, jitted, for comparison)."""
  forward = jax.jit(batched_loss)
  return {
    FLOOR: floor_call(batched_loss, params, batch),
    FORWARD: lambda: forward(params, batch),
  }


def floor_lowered(batched_loss, params, batch):
  """The floor program lowered for ``params`` and ``batch`` (its compiled
  memory, its text)."""
  one, zero = jnp.float32(1.0), jnp.float32(0.0)
  return floor_program(batched_loss).lower(params, batch, batch, one, zero)


def floor_seconds(times: dict, stat: int = 1) -> float:
  """The floor's seconds from ``{name: (min, median)}`` (``stat`` 1:
  median, 0: min)."""
  return times[FLOOR][stat]


def floor_text(times: dict) -> str:
  """One sentence: the floor, min / median ms, beside one forward alone."""

  def ms(pair):
    return f"{pair[0] * 1e3:.2f} / {pair[1] * 1e3:.2f}"

  text = (
    "Floor (one compiled program: two plain forward passes, then one "
    "donated in-place pass over the parameters; no draw, no perturbation, "
    f"no clipping or noise), min / median ms: {ms(times[FLOOR])}"
  )
  if FORWARD in times:
    two = tuple(2 * t for t in times[FORWARD])
    text += (
      f"; one forward called alone {ms(times[FORWARD])}, twice that {ms(two)}"
    )
  return text + "."
