"""One run over several processes (hosts) with ``jax.distributed``.

``config.distributed.enabled`` makes the run call
:func:`jax.distributed.initialize` before JAX does anything else. With
``coordinator_address`` empty, JAX detects the cluster itself (Cloud TPU pod
slices, SLURM, Open MPI); otherwise the address, ``num_processes`` and
``process_id`` are passed as given (a localhost test, or a hand-made
launcher). Every process runs the same command; JAX's devices are then those
of all hosts, and :class:`experiments.run.placement.Placement` lays the mesh over
them.

What each process does differently, and what stays the same:

* **The secret.** Process 0 draws the run's 256-bit secret from OS entropy;
  :func:`share_secret` broadcasts it once, in memory, over the job's
  collective channel (never a file, never a seed). Every process therefore
  derives the same Poisson decisions and the same noise: the noise is added
  once, identically everywhere, and no private data is exchanged to agree on
  a batch. Hosts of one job must trust one another alike: any of them holds
  the secret. The privacy ledger, which says how many times each step may
  already have been computed (the attempt of its randomness,
  :mod:`experiments.run.attempts`), is shared the same way from process 0.
* **The data.** Each host keeps only its own contiguous range of the
  training set (:class:`HostShard`). Every host makes the same sampling
  decisions; host ``h`` fills its block of the global batch with the sampled
  examples of its own range, padded with masked rows to a block size shared
  by all hosts, and the blocks are joined with
  :func:`jax.make_array_from_process_local_data`. The batch is the same set
  of examples as on one host, in another order.
* **Files.** Process 0 alone writes the metrics, ledger, result, plots and
  trajectory log; every process takes part in the sharded orbax checkpoint
  (each host writes its own shards).
"""

from __future__ import annotations

import itertools
import math
import operator
import warnings
from typing import TYPE_CHECKING

import jax
import numpy as np
from jax.experimental import multihost_utils

from zoprivacy.data import sampling

if TYPE_CHECKING:
  from experiments.run.settings import Distributed


def initialize(d: Distributed) -> None:
  """Calls :func:`jax.distributed.initialize` when the run's
  ``config.distributed`` block ``d`` asks for it.

  Must run before any JAX computation of the process. Its fields: ``enabled``; ``coordinator_address`` (``host:port`` of process 0;
  empty: auto-detection on TPU/SLURM/Open MPI); ``num_processes`` and
  ``process_id`` (0 and -1: auto-detected); ``local_device_ids`` (empty: all
  local devices); ``cpu_collectives`` (the CPU backend's cross-process
  collectives, ``"gloo"``; empty on GPU and TPU).
  """
  if not d.enabled:
    return
  if jax.distributed.is_initialized():
    return
  if d.cpu_collectives:
    jax.config.update("jax_cpu_collectives_implementation", d.cpu_collectives)
  kwargs = {}
  if d.coordinator_address:
    kwargs["coordinator_address"] = d.coordinator_address
  if d.num_processes:
    kwargs["num_processes"] = int(d.num_processes)
  if d.process_id is not None and int(d.process_id) >= 0:
    kwargs["process_id"] = int(d.process_id)
  local_device_ids = parse_local_device_ids(d.local_device_ids)
  if local_device_ids is not None:
    kwargs["local_device_ids"] = local_device_ids
  jax.distributed.initialize(**kwargs)


def parse_local_device_ids(value) -> list[int] | None:
  """``config.distributed.local_device_ids`` as a list of device ids, or
  None (empty: JAX's default, which under SLURM is ``[SLURM_LOCALID]``).

  Accepts what a config file or the command line gives: ``"0,1"`` (or
  ``"0, 1"``, ``"[0, 1]"``), a list or tuple of ints, or one int.
  """
  if isinstance(value, bool):
    raise ValueError(f"local_device_ids={value!r}; give device ids.")
  if value is None:
    return None
  if isinstance(value, int):
    items = [value]
  elif isinstance(value, str):
    text = value.strip().strip("[]()")
    items = [t.strip() for t in text.split(",") if t.strip()]
  else:
    items = list(value)
  if not items:
    return None
  try:
    ids = [int(i) if isinstance(i, str) else operator.index(i) for i in items]
  except (TypeError, ValueError) as e:
    raise ValueError(
      f"local_device_ids={value!r}; give comma-separated device ids, "
      "e.g. '0,1,2,3,4,5,6,7'."
    ) from e
  if min(ids) < 0 or len(set(ids)) != len(ids):
    raise ValueError(
      f"local_device_ids={value!r}: device ids are distinct and >= 0."
    )
  return ids


def is_primary() -> bool:
  """The process that writes the run's files (process 0)."""
  return jax.process_index() == 0


# The coordination service's barrier waits this long for the slowest host.
# A collective alone gives up after 30 s (Gloo's context set-up on CPU),
# while hosts of one job may reach their first broadcast minutes apart
# (imports, data loading and compilation on a loaded machine).
BARRIER_TIMEOUT_S = 600
_barrier_ids = itertools.count()


def _broadcast(x):
  """Process 0's ``x`` on every process, once all of them have arrived.

  Every process makes the same broadcasts in the same order, so the
  numbered barrier names agree.
  """
  # Imported on use: orbax takes a second to import, and only a run of
  # several processes broadcasts.
  from orbax.checkpoint import multihost as orbax_multihost  # pylint: disable=g-import-not-at-top

  orbax_multihost.get_barrier_sync_fn()(
    key=f"zoprivacy_broadcast_{next(_barrier_ids)}",
    timeout_ms=BARRIER_TIMEOUT_S * 1000,
  )
  return multihost_utils.broadcast_one_to_all(x)


def share_secret(secret: bytes) -> bytes:
  """Process 0's ``secret`` on every process (a no-op with one process).

  The bytes travel once, in memory, through the job's own collective
  channel; they are never written anywhere or derived from public values.
  """
  if jax.process_count() == 1:
    return secret
  shared = _broadcast(np.frombuffer(secret, np.uint8))
  return bytes(np.asarray(shared, np.uint8))


def share_text(text: str) -> str:
  """Process 0's ``text`` on every process (a no-op with one process)."""
  if jax.process_count() == 1:
    return text
  data = np.frombuffer(text.encode(), np.uint8)
  size = _broadcast(np.int64(data.size))
  buffer = np.zeros(int(size), np.uint8)
  if is_primary():
    buffer[:] = data
  shared = _broadcast(buffer)
  return bytes(np.asarray(shared, np.uint8)).decode()


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


class HostShard:
  """This host's range of the training set and its block of every batch.

  Host ``h`` of ``H`` owns the examples ``[bounds[h], bounds[h + 1])`` (near
  equal, contiguous ranges). For a sampled batch, every host counts the
  sampled examples of every range (the decisions are the same everywhere,
  from the shared secret), so all hosts agree on the block size: the
  largest range's Poisson capacity (overflow probability 1e-9, as on one
  host), grown with a warning, never dropping an example, if a block
  overflows. Padding rows are masked and never reach a sum.
  """

  def __init__(
    self,
    dataset_size: int,
    sampler,
    *,
    block_multiple: int = 1,
    num_hosts: int | None = None,
    host: int | None = None,
  ):
    num_hosts = jax.process_count() if num_hosts is None else num_hosts
    host = jax.process_index() if host is None else host
    self.bounds = np.linspace(0, dataset_size, num_hosts + 1).astype(np.int64)
    self.start, self.stop = int(self.bounds[host]), int(self.bounds[host + 1])
    self.num_hosts, self.block_multiple = num_hosts, block_multiple
    largest = int(np.max(np.diff(self.bounds)))
    q = getattr(sampler, "sampling_probability", None)
    if (
      q is None
    ):  # fixed-size batches: the proportional share, grown if need be
      need = math.ceil(sampler.capacity * largest / dataset_size)
    else:
      need = sampling.poisson_capacity(largest, q, multiple=1)
    self.capacity = self._round(need)

  def _round(self, rows: int) -> int:
    return max(1, math.ceil(rows / self.block_multiple)) * self.block_multiple

  def rows(self, arrays):
    """This host's range of a pytree of per-example arrays."""
    return jax.tree.map(lambda a: a[self.start : self.stop], arrays)

  def block(self, index_batch: sampling.IndexBatch) -> sampling.IndexBatch:
    """This host's block of ``index_batch``: the sampled examples of its own
    range (indices relative to :meth:`rows`), padded to :attr:`capacity`."""
    chosen = np.asarray(index_batch.indices)[np.asarray(index_batch.mask)]
    counts = np.histogram(chosen, self.bounds)[0]
    need = self._round(int(counts.max(initial=0)))
    if need > self.capacity:
      warnings.warn(
        f"A host's share of the batch ({int(counts.max())} examples) exceeds "
        f"the block size {self.capacity}; growing it to {need} (one "
        "recompilation, no example dropped).",
        stacklevel=2,
      )
      self.capacity = need
    own = chosen[(chosen >= self.start) & (chosen < self.stop)] - self.start
    indices = np.zeros(self.capacity, np.int32)
    indices[: own.size] = own
    mask = np.zeros(self.capacity, bool)
    mask[: own.size] = True
    return sampling.IndexBatch(indices, mask, index_batch.selection)
