"""Models accept any leading batch axes: fold them into one and back."""

from __future__ import annotations

import jax


def fold(x: jax.Array, event_ndim: int) -> tuple[jax.Array, tuple[int, ...]]:
  """``x`` of shape ``[*batch, *event]`` as ``[prod(batch), *event]``.

  Returns the folded array and ``batch``, to restore with
  ``out.reshape(batch + out.shape[1:])``.
  """
  split = x.ndim - event_ndim
  return x.reshape((-1,) + x.shape[split:]), x.shape[:split]
