"""One run over several processes (hosts) with ``jax.distributed``.

``config.distributed.enabled`` makes the run call
:func:`jax.distributed.initialize` before JAX does anything else. With
``coordinator_address`` empty, JAX detects the cluster itself (Cloud TPU pod
slices, SLURM, Open MPI); otherwise the address, ``num_processes`` and
``process_id`` are passed as given (a localhost test, or a hand-made
launcher). Every process runs the same command; JAX's devices are then those
of all hosts, and :class:`experiments.placement.Placement` lays the mesh over
them.

What each process does differently, and what stays the same:

* **The secret.** Process 0 draws the run's 256-bit secret from OS entropy;
  :func:`share_secret` broadcasts it once, in memory, over the job's
  collective channel (never a file, never a seed). Every process therefore
  derives the same Poisson decisions and the same noise: the noise is added
  once, identically everywhere, and no private data is exchanged to agree on
  a batch. Hosts of one job must trust one another alike: any of them holds
  the secret.
* **The data.** Every host computes the same padded batch of indices, then
  gathers only the rows that land on its own devices
  (:func:`local_rows`); the global batch is assembled with
  :func:`jax.make_array_from_process_local_data`.
* **Files.** Process 0 alone writes the metrics, ledger, result, plots and
  trajectory log; every process takes part in the sharded orbax checkpoint
  (each host writes its own shards).
"""

from __future__ import annotations

import jax
import numpy as np
from jax.experimental import multihost_utils


def initialize(config) -> None:
  """Calls :func:`jax.distributed.initialize` when the config asks for it.

  Must run before any JAX computation of the process. ``config.distributed``
  fields: ``enabled``; ``coordinator_address`` (``host:port`` of process 0;
  empty: auto-detection on TPU/SLURM/Open MPI); ``num_processes`` and
  ``process_id`` (0 and -1: auto-detected); ``local_device_ids`` (empty: all
  local devices); ``cpu_collectives`` (the CPU backend's cross-process
  collectives, ``"gloo"``; empty on GPU and TPU).
  """
  d = config.get("distributed")
  if not d or not d.get("enabled"):
    return
  if jax.distributed.is_initialized():
    return
  if d.get("cpu_collectives"):
    jax.config.update("jax_cpu_collectives_implementation", d.cpu_collectives)
  kwargs = {}
  if d.get("coordinator_address"):
    kwargs["coordinator_address"] = d.coordinator_address
  if d.get("num_processes"):
    kwargs["num_processes"] = int(d.num_processes)
  if d.get("process_id") is not None and int(d.process_id) >= 0:
    kwargs["process_id"] = int(d.process_id)
  if d.get("local_device_ids"):
    kwargs["local_device_ids"] = [int(i) for i in d.local_device_ids]
  jax.distributed.initialize(**kwargs)


def is_primary() -> bool:
  """The process that writes the run's files (process 0)."""
  return jax.process_index() == 0


def share_secret(secret: bytes) -> bytes:
  """Process 0's ``secret`` on every process (a no-op with one process).

  The bytes travel once, in memory, through the job's own collective
  channel; they are never written anywhere or derived from public values.
  """
  if jax.process_count() == 1:
    return secret
  shared = multihost_utils.broadcast_one_to_all(np.frombuffer(secret, np.uint8))
  return bytes(np.asarray(shared, np.uint8))


def local_rows(sharding: jax.sharding.Sharding, num_rows: int) -> slice:
  """The contiguous rows of a ``[num_rows, ...]`` array that ``sharding``
  puts on this process's devices."""
  starts, stops = [], []
  for index in sharding.addressable_devices_indices_map((num_rows,)).values():
    rows = index[0]
    starts.append(rows.start or 0)
    stops.append(num_rows if rows.stop is None else rows.stop)
  start, stop = min(starts), max(stops)
  covered = sum(b - a for a, b in set(zip(starts, stops)))
  if covered != stop - start:
    raise ValueError(
      "This process's devices do not hold one contiguous block of the batch; "
      "order the mesh's devices by process (jax.devices() does)."
    )
  return slice(start, stop)


def global_batch(local_tree, sharding, num_rows: int):
  """Assembles each host's rows (``local_tree``) into global arrays."""
  return jax.tree.map(
    lambda x: jax.make_array_from_process_local_data(
      sharding, np.asarray(x), (num_rows, *np.shape(x)[1:])
    ),
    local_tree,
  )


def fetch(x) -> np.ndarray:
  """``x`` as a NumPy array on every process, gathering shards that live on
  other hosts (a no-op copy for arrays this process holds whole)."""
  if not isinstance(x, jax.Array) or x.is_fully_addressable:
    return np.asarray(x)
  if x.is_fully_replicated:
    return np.asarray(x.addressable_data(0))
  return np.asarray(multihost_utils.process_allgather(x, tiled=True))
