"""Data-parallel placement with ``jax.jit`` + ``NamedSharding`` (modern pjit).

A private zeroth-order step needs no parameter-sized communication: every
device regenerates the same public direction from the same key, evaluates
the loss on its shard of the batch, and the per-example clipped scalars are
reduced over the ``data`` axis. XLA turns the masked batch sum of
:func:`zoprivacy.mechanisms.masked_sum` into an all-reduce of ``q`` scalars.
Noise is added after the reduction from a replicated key, so every device
adds the same noise once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def data_mesh(
  num_devices: int | None = None, axis_name: str = "data"
) -> jax.sharding.Mesh:
  """A 1-D mesh over the first ``num_devices`` devices (default: all)."""
  devices = jax.devices()
  num_devices = len(devices) if num_devices is None else num_devices
  return jax.make_mesh(
    (num_devices,), (axis_name,), devices=devices[:num_devices]
  )


def batch_sharding(
  mesh: jax.sharding.Mesh, axis_name: str = "data"
) -> NamedSharding:
  """Leading (batch) axis split over ``axis_name``, the rest replicated."""
  return NamedSharding(mesh, P(axis_name))


def replicated(mesh: jax.sharding.Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def jit_data_parallel(
  step: Callable,
  mesh: jax.sharding.Mesh,
  *,
  num_args: int,
  batch_argnums: Sequence[int],
  axis_name: str = "data",
  donate_argnums=(),
) -> Callable:
  """``jax.jit`` of ``step`` with the batch arguments sharded over the mesh.

  Arguments in ``batch_argnums`` (pytrees with a leading batch axis, e.g. the
  batch and its mask) are split over ``axis_name``; every other argument and
  every output is replicated.
  """
  shardings = tuple(
    batch_sharding(mesh, axis_name) if i in batch_argnums else replicated(mesh)
    for i in range(num_args)
  )
  return jax.jit(
    step,
    in_shardings=shardings,
    out_shardings=replicated(mesh),
    donate_argnums=donate_argnums,
  )
