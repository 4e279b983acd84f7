"""The floor of a zeroth-order step: two plain forward passes plus one
donated in-place pass over the parameters.

A zeroth-order step has to evaluate the batched loss twice (at ``x + l u``
and ``x - l u``) and write its update into the parameters once. Everything
else it does (drawing ``u``, forming the perturbed parameters, clipping,
noise) is its own cost on top of that floor. The calls here are timed in the
same round-robin as the steps they are set beside:

* ``forward``: one batched forward pass at the parameters;
* ``update pass``: ``p <- a p + b`` on every leaf, one jit with ``p``
  donated, so the pass reads and writes each parameter once in place, as a
  donated step writes its update. ``a = 1`` and ``b = 0`` are arguments,
  not constants, so XLA cannot fold the pass away (and the parameters do
  not drift over the calls).

``floor = 2 x forward + update pass`` (medians; the min with the mins).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

FORWARD, UPDATE = "forward", "update pass"


def _axpb(params, a, b):
  return jax.tree.map(
    lambda x: x * a.astype(x.dtype) + b.astype(x.dtype), params
  )


update_pass = jax.jit(_axpb, donate_argnums=0)


def update_pass_call(params):
  """A zero-argument call that runs :data:`update_pass` on its own copy of
  ``params`` (each call donates the previous call's output)."""
  held = [jax.tree.map(jnp.copy, params)]
  a, b = jnp.float32(1.0), jnp.float32(0.0)

  def call():
    held[0] = update_pass(held[0], a, b)
    return held[0]

  return call


def floor_calls(batched_loss, params, batch) -> dict:
  """``{FORWARD: call, UPDATE: call}`` to time beside the steps."""
  forward = jax.jit(batched_loss)
  return {
    FORWARD: lambda: forward(params, batch),
    UPDATE: update_pass_call(params),
  }


def floor_seconds(times: dict, stat: int = 1) -> float:
  """``2 forward + update pass`` from ``{name: (min, median)}`` times
  (``stat`` 1: medians, 0: mins)."""
  return 2 * times[FORWARD][stat] + times[UPDATE][stat]


def floor_text(times: dict) -> str:
  """One sentence: the floor's parts, min / median ms."""

  def ms(pair):
    return f"{pair[0] * 1e3:.2f} / {pair[1] * 1e3:.2f}"

  two = tuple(2 * t for t in times[FORWARD])
  floor = (floor_seconds(times, 0), floor_seconds(times, 1))
  return (
    f"Floor (two plain forwards + one donated update pass over the "
    f"parameters, min / median ms): {ms(two)} + {ms(times[UPDATE])} = "
    f"{ms(floor)}."
  )
