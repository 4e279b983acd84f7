"""Where a run's arrays live: the device mesh of ``config.mesh``.

``config.mesh`` maps mesh axes to sizes (``{"data": 2, "fsdp": 4}``; one
size may be ``-1``); unset, every device goes on ``data``, so the default
command uses one CPU or all the accelerators of a machine unchanged. The
trainable and frozen parameters are sharded FSDP-style on ``fsdp``
(:func:`zoprivacy.sharding.fsdp_spec`), the padded batch and its mask are
split over ``data`` x ``fsdp`` (padded further, with masked rows, to a
multiple of that size), and everything else (keys, the integer noise, public
batches) is replicated. The step is one ``jax.jit``: XLA inserts the
collectives (for a zeroth-order step, the all-reduce of the ``q`` clipped
scalar sums; for FSDP, the parameter gathers of the forward pass).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from zoprivacy import sharding
from zoprivacy.data import sampling


@dataclasses.dataclass(frozen=True)
class Placement:
  """The mesh of a run and how its arrays are placed on it."""

  mesh: jax.sharding.Mesh

  @classmethod
  def from_config(cls, config) -> Placement:
    axes = config.get("mesh")
    if axes is not None and not isinstance(axes, dict):
      axes = axes.to_dict()
    return cls(sharding.make_mesh(axes))

  @property
  def num_devices(self) -> int:
    return self.mesh.size

  @property
  def serialize_steps(self) -> bool:
    """Several CPU devices: one step at a time. XLA's in-process CPU
    collectives can deadlock when the executions of consecutive steps
    overlap on a small thread pool (simulated devices on few cores)."""
    return self.num_devices > 1 and self.mesh.devices.flat[0].platform == "cpu"

  def params(self, tree):
    """``tree`` sharded on ``fsdp`` (replicated when ``fsdp`` is 1)."""
    return sharding.place_like(tree, self.param_shardings(tree))

  def param_shardings(self, tree):
    return sharding.param_shardings(self.mesh, tree)

  def constrain(self, tree):
    """Inside a jitted step: keep ``tree`` on its parameter shardings."""
    return jax.lax.with_sharding_constraint(tree, self.param_shardings(tree))

  def index_batch(self, batch: sampling.IndexBatch) -> sampling.IndexBatch:
    """Pads with masked rows to a multiple of the batch-sharded devices."""
    multiple = sharding.batch_multiple(self.mesh)
    extra = -len(batch.mask) % multiple
    if not extra:
      return batch
    return sampling.IndexBatch(
      np.concatenate([batch.indices, np.zeros(extra, batch.indices.dtype)]),
      np.concatenate([batch.mask, np.zeros(extra, bool)]),
    )

  def batch(self, batch: sampling.PaddedBatch) -> sampling.PaddedBatch:
    """The batch and its mask split over ``data`` x ``fsdp``."""
    if self.num_devices == 1:
      return batch
    split = sharding.data_sharding(self.mesh)
    return jax.tree.map(lambda x: jax.device_put(x, split), batch)
