"""One process of a two-process library job (localhost, 2 CPU devices each).

``python hosts_worker.py PROCESS_ID PORT SAVED OUT``: joins the job, makes a
default state eagerly (each process draws its own handle, as a library user
on several hosts does), restores the pickled state ``SAVED`` (stepped once
by the test process), steps both twice on a mesh over the job's 4 devices
under ``jax.jit`` (the batch split by rows; the host-local state passed
in as it is, which ``jit`` takes as replicated) and
writes the releases this process holds to ``OUT`` as JSON.
"""

import json
import os
import pickle
import sys

process_id, port = int(sys.argv[1]), int(sys.argv[2])
saved, out = sys.argv[3], sys.argv[4]
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"

import jax  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"localhost:{port}", 2, process_id)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import restore_worker as rw  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import zoprivacy  # noqa: E402

mesh = jax.sharding.Mesh(np.array(jax.devices()), ("data",))
replicated, rows = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
batch = jax.make_array_from_callback(
  rw.BATCH.shape, rows, lambda i: np.asarray(rw.BATCH)[i]
)
mask = jax.make_array_from_callback(
  (8,), rows, lambda i: np.asarray(rw.MASKS[0])[i]
)
step = jax.jit(lambda s, m, b: rw.STEP(s, m, batch=b), out_shardings=replicated)


with open(saved, "rb") as f:
  restored = pickle.load(f)
fresh = zoprivacy.init(rw.TX, jnp.zeros(rw.DIM))
result = {"fresh_handle": np.asarray(fresh[0].noise_key.handle).tolist()}
for name, state in [("fresh", fresh), ("restored", restored)]:
  released = []  # the host-local state goes in as it is: jit replicates it
  for _ in range(2):
    state = step(state, mask, batch)
    held = state[0].released.addressable_data(0)
    released.append(np.asarray(held).tolist())
  result[name] = released
with open(out, "w") as f:
  json.dump(result, f)
