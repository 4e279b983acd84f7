"""Per-host blocks of a Poisson batch: together exactly the sampled set,
each from its own host's range, padding masked, sizes agreed by all hosts."""

import numpy as np
import pytest

from experiments.run.multihost import HostShard
from zoprivacy.data import sampling


def _blocks(n, sampler, num_hosts, step, multiple=2):
  shards = [
    HostShard(n, sampler, block_multiple=multiple, num_hosts=num_hosts, host=h)
    for h in range(num_hosts)
  ]
  batch = sampler.batch_indices(step)
  return shards, batch, [s.block(batch) for s in shards]


@pytest.mark.parametrize("num_hosts", [1, 2, 3, 8])
def test_blocks_partition_the_sampled_batch(num_hosts):
  n = 1001
  sampler = sampling.PoissonSampler(n, 64, insecure_test_seed=3)
  for step in range(20):
    shards, batch, blocks = _blocks(n, sampler, num_hosts, step)
    chosen = np.sort(batch.indices[batch.mask])
    capacities = {len(b.mask) for b in blocks}
    assert len(capacities) == 1  # every host agrees on the block size
    assert capacities.pop() % 2 == 0
    rows = []
    for s, b in zip(shards, blocks):
      assert not b.indices[~b.mask].any()  # padding points at row 0, masked
      local = b.indices[b.mask]
      assert np.all((local >= 0) & (local < s.stop - s.start))
      rows.append(local + s.start)
    np.testing.assert_array_equal(np.sort(np.concatenate(rows)), chosen)
  assert shards[0].start == 0 and shards[-1].stop == n


def test_ranges_cover_the_dataset_and_rows_slice_them():
  sampler = sampling.PoissonSampler(10, 4, insecure_test_seed=0)
  shards = [HostShard(10, sampler, num_hosts=3, host=h) for h in range(3)]
  assert [(s.start, s.stop) for s in shards] == [(0, 3), (3, 6), (6, 10)]
  data = (np.arange(10) * 10, {"x": np.arange(20).reshape(10, 2)})
  labels, inputs = shards[1].rows(data)
  np.testing.assert_array_equal(labels, [30, 40, 50])
  np.testing.assert_array_equal(inputs["x"][:, 0], [6, 8, 10])


def test_an_overflowing_block_grows_on_every_host_and_drops_nothing():
  n = 400
  sampler = sampling.FullBatchSampler(n)
  shards = [HostShard(n, sampler, num_hosts=2, host=h) for h in range(2)]
  assert [s.capacity for s in shards] == [200, 200]
  # Blocks of 100 (as if set so at start-up) and a batch with 200 examples
  # in host 0's range and 60 in host 1's: both hosts grow to 200.
  batch = sampling.IndexBatch(
    np.arange(260, dtype=np.int32), np.ones(260, bool)
  )
  with pytest.warns(UserWarning, match="growing it to 200"):
    shards[0].capacity = 100
    block = shards[0].block(batch)
  assert block.mask.sum() == 200 and len(block.mask) == 200
  with pytest.warns(UserWarning, match="growing it to 200"):
    shards[1].capacity = 100
    other = shards[1].block(batch)
  assert other.mask.sum() == 60 and len(other.mask) == 200
