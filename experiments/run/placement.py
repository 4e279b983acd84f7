"""Where a run's arrays live: the device mesh of ``config.mesh``.

``config.mesh`` maps mesh axes to sizes (``{"data": 2, "fsdp": 4}``; one
size may be ``-1``); unset, every device goes on ``data``, so the default
command uses one CPU or all the accelerators of a machine unchanged. The
trainable and frozen parameters are sharded FSDP-style on ``fsdp``
(:func:`zoprivacy.core.sharding.fsdp_spec`), the padded batch and its mask are
split over ``data`` x ``fsdp`` (padded further, with masked rows, to a
multiple of that size and of ``config.physical_batch_size``: whole
physical chunks, each split over those devices), and everything else
(keys, the integer noise, public batches) is replicated. The step is one ``jax.jit``: XLA inserts the
collectives (for a zeroth-order step, the all-reduce of the ``q`` clipped
scalar sums; for FSDP, the parameter gathers of the forward pass).

Over several processes (:mod:`experiments.run.multihost`) the mesh spans every
host's devices; each host places only its own shards: the parameters from
its (identical) copy, and the batch rows that land on its devices.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import jax
import numpy as np

from experiments.run import multihost
from zoprivacy.core import sharding
from zoprivacy.data import sampling

if TYPE_CHECKING:
  from experiments.run.settings import Settings


@dataclasses.dataclass(frozen=True)
class Placement:
  """The mesh of a run and how its arrays are placed on it."""

  mesh: jax.sharding.Mesh
  physical_batch_size: int | None = None

  @classmethod
  def of(cls, settings: Settings) -> Placement:
    """The placement of the run of ``settings`` (its mesh and physical
    batch), checked."""
    placement = cls(
      sharding.make_mesh(settings.mesh.axes()), settings.physical_batch_size
    )
    placement.check_physical_batch()
    return placement

  def row_multiple(self, rows: int) -> int:
    """A padded batch of ``rows`` rows is padded to a multiple of this:
    the devices it is split over, and the physical batch (whole chunks)
    when it takes more than one."""
    multiple = sharding.batch_multiple(self.mesh)
    size = self.physical_batch_size
    return (
      multiple if size is None or size >= rows else math.lcm(multiple, size)
    )

  def check_physical_batch(self) -> None:
    """A physical chunk is split over the batch's devices: its rows are a
    multiple of them."""
    size, devices = self.physical_batch_size, sharding.batch_multiple(self.mesh)
    if size is not None and size % devices:
      raise ValueError(
        f"physical_batch_size={size} is not a multiple of the {devices} "
        "devices the batch is split over: each physical chunk is split "
        "over all of them. Set it to a multiple of "
        f"{devices} (e.g. {max(devices, size // devices * devices)}); it "
        "is the whole mesh's rows per chunk, not one device's."
      )

  @property
  def num_devices(self) -> int:
    return self.mesh.size

  @property
  def serialize_steps(self) -> bool:
    """Several CPU devices: one step at a time. XLA's in-process CPU
    collectives can deadlock when the executions of consecutive steps
    overlap on a small thread pool (simulated devices on few cores)."""
    return self.num_devices > 1 and self.mesh.devices.flat[0].platform == "cpu"

  @property
  def multiprocess(self) -> bool:
    return jax.process_count() > 1

  def params(self, tree):
    """``tree`` sharded on ``fsdp`` (replicated when ``fsdp`` is 1)."""
    return self._place(tree, self.param_shardings(tree))

  def replicated(self, tree):
    """``tree`` (the same on every process) replicated on the mesh."""
    if tree is None or not self.multiprocess:
      return tree
    rep = jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec())
    return self._place(tree, jax.tree.map(lambda _: rep, tree))

  def like(self, x, reference: jax.Array):
    """``x`` (the same on every process) placed as ``reference`` is."""
    return self._place(x, reference.sharding)

  def _place(self, tree, shardings):
    if not self.multiprocess:
      return sharding.place_like(tree, shardings)
    # Each process fills its own devices' shards from its copy of ``tree``.
    return jax.tree.map(_fill_own_shards, tree, shardings)

  def param_shardings(self, tree):
    return sharding.param_shardings(self.mesh, tree)

  def constrain(self, tree):
    """Inside a jitted step: keep ``tree`` on its parameter shardings."""
    return jax.lax.with_sharding_constraint(tree, self.param_shardings(tree))

  def index_batch(self, batch: sampling.IndexBatch) -> sampling.IndexBatch:
    """Pads with masked rows to :meth:`row_multiple`."""
    multiple = self.row_multiple(len(batch.mask))
    extra = -len(batch.mask) % multiple
    if not extra:
      return batch
    return batch._replace(
      indices=np.concatenate(
        [batch.indices, np.zeros(extra, batch.indices.dtype)]
      ),
      mask=np.concatenate([batch.mask, np.zeros(extra, bool)]),
    )

  def host_shard(self, dataset_size: int, sampler):
    """With several processes, this host's :class:`multihost.HostShard`;
    ``None`` with one."""
    if not self.multiprocess:
      return None
    multiple = sharding.batch_multiple(self.mesh)
    if multiple % jax.process_count():
      raise ValueError(
        f"The batch is split over {multiple} devices, not a multiple of the "
        f"{jax.process_count()} processes."
      )
    return multihost.HostShard(
      dataset_size, sampler, block_multiple=multiple // jax.process_count()
    )

  def gather_batch(
    self, arrays, index_batch: sampling.IndexBatch, host_shard=None
  ) -> sampling.Batch:
    """The padded batch of ``index_batch`` placed on the mesh. With several
    processes, ``arrays`` is this host's range (``host_shard.rows``) and
    each host gathers only its own block."""
    if host_shard is None:
      return self.batch(
        sampling.padded_batch(arrays, self.index_batch(index_batch))
      )
    local = sampling.padded_batch(arrays, host_shard.block(index_batch))
    rows = host_shard.capacity * host_shard.num_hosts
    return multihost.global_batch(
      local, sharding.data_sharding(self.mesh), rows
    )

  def batch(self, batch: sampling.Batch) -> sampling.Batch:
    """The batch and its mask split over ``data`` x ``fsdp``."""
    if self.num_devices == 1:
      return batch
    split = sharding.data_sharding(self.mesh)
    return jax.tree.map(lambda x: jax.device_put(x, split), batch)


def _fill_own_shards(x, target: jax.sharding.Sharding) -> jax.Array:
  """``x`` (the same on every process) as a global array on ``target``."""
  if isinstance(x, jax.Array) and jax.dtypes.issubdtype(
    x.dtype, jax.dtypes.prng_key
  ):
    data = _fill_own_shards(jax.random.key_data(x), target)
    return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
  value = np.asarray(x)
  return jax.make_array_from_callback(
    value.shape, target, lambda index: value[index]
  )
