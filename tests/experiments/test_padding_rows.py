"""What the runner's padding rows hold (docs/per_example_contract.md): the
sampler points them at row 0; the runner's gather writes zeros there,
including the rows it adds for a multiple of the batch-sharded devices."""

import numpy as np

from experiments.run.placement import Placement
from zoprivacy.core import sharding
from zoprivacy.data import sampling


def test_the_runners_padding_rows_are_zeros_not_copies_of_row_0(monkeypatch):
  n = 40
  data = (
    np.arange(1, n + 1, dtype=np.float32)[:, None]
    * np.ones((1, 3), np.float32),
    np.arange(1, n + 1, dtype=np.int32),
  )
  sampler = sampling.PoissonSampler(n, 4, insecure_test_seed=0)
  index_batch = sampler.batch_indices(0)
  pad = ~index_batch.mask
  assert pad.any() and not index_batch.indices[pad].any()  # index 0
  # A plain gather leaves copies of row 0 in the padding slots.
  gathered = sampling.gather(data, index_batch.indices)
  assert np.all(gathered[1][pad] == data[1][0])

  # Pretend the batch is split over 7 devices: the runner adds masked rows.
  monkeypatch.setattr(sharding, "batch_multiple", lambda mesh: 7)
  placement = Placement(sharding.make_mesh({"data": 1, "fsdp": 1, "model": 1}))
  batch = placement.gather_batch(data, index_batch)
  rows = len(batch.mask)
  assert rows % 7 == 0 and rows > len(index_batch.mask)
  real = np.asarray(batch.mask)
  for leaf in batch.data:
    assert not np.asarray(leaf)[~real].any()  # every padding row is zeros
  np.testing.assert_array_equal(
    np.asarray(batch.data[1])[real], index_batch.indices[index_batch.mask] + 1
  )
