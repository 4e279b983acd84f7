"""Run as a subprocess with 8 simulated CPU devices (see
test_counter_positions.py).

Draws counter-hash directions at positions beyond 2^32 with the output
sharded over 8 devices (as a sharded leaf's ``u`` is drawn: each device
computes its own shard of the positions) and prints one JSON line: per
counter hash and path, whether the sharded draw equals the construction's
words (the independent NumPy transcription), and the draws' shardings.
"""

import json
import os
import sys

os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
)
os.environ["JAX_PLATFORMS"] = "cpu"
sys.path.insert(0, os.path.dirname(__file__))

import counter_reference  # pylint: disable=g-import-not-at-top
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from zoprivacy.zo import counter_hash, counter_hash2, counter_positions

HASHES = {"counter": counter_hash, "counter2": counter_hash2}
REFERENCE = {
  "counter": counter_reference.bits,
  "counter2": counter_reference.bits2,
}
TOP = 2**32


def main():
  assert jax.device_count() == 8, jax.devices()
  key = jax.random.key(2024)
  words = tuple(int(w) for w in jax.random.key_data(key))
  sharded = NamedSharding(
    Mesh(np.array(jax.devices()), ("fsdp",)), PartitionSpec("fsdp")
  )
  # (shape, start, row limit): a slice across 2^32; a leaf numbered by rows
  # (the numbering of a leaf of 2^32 or more, on a small shape).
  cases = {
    "slice": ((16, 24), TOP - 100, TOP),
    "rows": ((16, 3, 5), 3 * TOP - 77, 64),
  }
  out = {}
  for prng, hash_ in HASHES.items():
    for name, (shape, start, limit) in cases.items():
      draw = jax.jit(
        lambda shape=shape, start=start, limit=limit, hash_=hash_: hash_.bits(
          key, 5, counter_positions.leaf_positions(shape, start, limit=limit)
        ),
        out_shardings=sharded,
      )
      got = draw()
      size = int(np.prod(shape))
      positions = np.uint64(start) + np.arange(size, dtype=np.uint64)
      want = REFERENCE[prng](*words, 5, positions).reshape(shape)
      out[f"{prng}/{name}"] = {
        "equal": bool(np.array_equal(np.asarray(got), want)),
        "shards": len(got.addressable_shards),
        "sharding": str(got.sharding.spec),
      }
  print(json.dumps(out))


if __name__ == "__main__":
  main()
