"""Placement on a device mesh with ``jax.jit`` + ``NamedSharding`` (modern pjit).

Axes: ``data`` (the batch), ``fsdp`` (the batch too, and the parameters,
sharded on one dimension each and gathered by XLA where a layer needs them)
and ``model`` (reserved: the bundled models have no tensor-parallel layout,
so it must have size 1). The batch is split over ``data`` x ``fsdp``.

A private zeroth-order step needs no parameter-sized communication: every
device regenerates the same public direction from the same key, evaluates
the loss on its shard of the batch, and the per-example clipped scalars are
reduced over the ``data`` axis. XLA turns the masked batch sum of
:func:`zoprivacy.mechanisms.noise.masked_sum` into an all-reduce of ``q``
scalars. Noise is added after the reduction from a replicated key, so every
device adds the same noise once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence

import jax
import numpy as np
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


MESH_AXES = ("data", "fsdp", "model")
BATCH_AXES = ("data", "fsdp")


def make_mesh(
  axes: Mapping[str, int] | None = None, devices=None
) -> jax.sharding.Mesh:
  """The ``(data, fsdp, model)`` mesh of ``axes`` sizes over ``devices``.

  Missing axes have size 1; one axis may be ``-1``: the devices left over.
  The default (``None``) puts every device on ``data``, so the same command
  uses one device or all of a machine's.
  """
  devices = list(jax.devices() if devices is None else devices)
  sizes = {name: 1 for name in MESH_AXES}
  sizes.update({"data": -1} if axes is None else dict(axes))
  unknown = set(sizes) - set(MESH_AXES)
  if unknown:
    raise ValueError(f"Unknown mesh axes {sorted(unknown)}; use {MESH_AXES}.")
  free = [k for k, v in sizes.items() if v == -1]
  if len(free) > 1:
    raise ValueError(f"At most one mesh axis may be -1, got {sizes}.")
  fixed = math.prod(v for v in sizes.values() if v != -1)
  if any(v < 1 and v != -1 for v in sizes.values()):
    raise ValueError(f"Mesh axis sizes must be >= 1 or -1, got {sizes}.")
  if free:
    if len(devices) % fixed:
      raise ValueError(f"{len(devices)} devices do not fit mesh {sizes}.")
    sizes[free[0]] = len(devices) // fixed
  total = math.prod(sizes.values())
  if total > len(devices):
    raise ValueError(
      f"Mesh {sizes} needs {total} devices; {len(devices)} are available."
    )
  if sizes["model"] != 1:
    raise ValueError(
      "The bundled models have no tensor-parallel layout: mesh axis "
      "'model' must have size 1 (shard parameters with 'fsdp')."
    )
  shape = tuple(sizes[name] for name in MESH_AXES)
  return jax.sharding.Mesh(
    np.asarray(devices[:total], dtype=object).reshape(shape), MESH_AXES
  )


def fsdp_spec(shape, fsdp_size: int) -> P:
  """Shard the largest dimension that ``fsdp_size`` divides; else replicate."""
  if fsdp_size == 1:
    return P()
  dims = [i for i, n in enumerate(shape) if n % fsdp_size == 0 and n > 1]
  if not dims:
    return P()
  best = max(dims, key=lambda i: shape[i])
  spec = [None] * len(shape)
  spec[best] = "fsdp"
  return P(*spec)


def param_shardings(mesh: jax.sharding.Mesh, params):
  """``NamedSharding`` per leaf: FSDP on ``fsdp`` (:func:`fsdp_spec`)."""
  size = mesh.shape.get("fsdp", 1)
  return jax.tree.map(
    lambda x: NamedSharding(mesh, fsdp_spec(np.shape(x), size)), params
  )


def data_sharding(mesh: jax.sharding.Mesh) -> NamedSharding:
  """Leading (batch) axis split over ``data`` x ``fsdp``."""
  return NamedSharding(mesh, P(BATCH_AXES))


def batch_multiple(mesh: jax.sharding.Mesh) -> int:
  """Padded batches must have a multiple of this many rows."""
  return math.prod(mesh.shape[a] for a in BATCH_AXES)


def place_like(tree, shardings):
  """``jax.device_put`` of ``tree`` leaf by leaf."""
  return jax.tree.map(jax.device_put, tree, shardings)


_COLLECTIVE = re.compile(
  r"=\s*(.+?)\s+(all-reduce|all-gather|reduce-scatter|all-to-all|"
  r"collective-permute)(-start)?\("
)
_BYTES = {
  "f64": 8,
  "s64": 8,
  "u64": 8,
  "f32": 4,
  "s32": 4,
  "u32": 4,
  "bf16": 2,
  "f16": 2,
  "s16": 2,
  "u16": 2,
  "s8": 1,
  "u8": 1,
  "pred": 1,
}


def collectives(hlo_text: str) -> list[tuple[str, str, int]]:
  """``(kind, shape, bytes)`` of every cross-device collective in compiled
  HLO text (``jit(f).lower(...).compile().as_text()``)."""
  out = []
  for line in hlo_text.splitlines():
    m = _COLLECTIVE.search(line)
    if not m:
      continue
    shape, total = m.group(1), 0
    for dtype, dims in re.findall(r"(\w+)\[([\d,]*)\]", shape):
      count = math.prod(int(v) for v in dims.split(",") if v)
      total += count * _BYTES.get(dtype, 4)
    out.append((m.group(2), shape, total))
  return out
