"""One process of a multi-process run on localhost (simulated CPU devices).

``python multiprocess_worker.py PROCESS_ID NUM_PROCESSES PORT DEVICES WORKDIR
STOP_AFTER OUT``: trains the default config's digits CNN with DPZero on a
``data=2 x fsdp=2`` mesh for 20 steps (resuming from ``WORKDIR``'s
checkpoint if there is one, stopping after ``STOP_AFTER`` steps), and writes
the result and the final parameters (gathered from every host) to ``OUT``
as JSON. ``NUM_PROCESSES=1`` is the single-process reference.

``... OUT every_estimator``: instead, runs every registered estimator for 3
steps with secret noise (OS entropy, no test seed) on the same mesh, and
writes each one's final parameter digest: every process must hold the same
parameters (the same noise on every host).

``... OUT late_start``: process 1 sleeps 40 s once the job is connected
and its backend is up (``jax.devices()`` meets the other hosts), as a slow
host would, longer than a collective waits for its peers (30 s): the run's
barrier must hold the others until it arrives.
"""

import json
import os
import sys
import time

process_id, num_processes, port, devices = map(int, sys.argv[1:5])
workdir, stop_after, out = sys.argv[5], int(sys.argv[6]), sys.argv[7]
every_estimator = "every_estimator" in sys.argv[8:]
late_start = "late_start" in sys.argv[8:]
os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "")
  + f" --xla_force_host_platform_device_count={devices}"
)

import hashlib  # noqa: E402

import config_overrides  # noqa: E402
import jax  # noqa: E402

from configs import default  # noqa: E402
from experiments.run import multihost, placement, privacy_config, train  # noqa: E402
from zoprivacy.estimators import registry  # noqa: E402


def _distributed(config):
  if num_processes > 1:
    config.distributed.enabled = True
    config.distributed.coordinator_address = f"localhost:{port}"
    config.distributed.num_processes = num_processes
    config.distributed.process_id = process_id
    config.distributed.cpu_collectives = "gloo"


def _estimator_config(name):
  """Every estimator's short run (as the runner-privacy test builds it),
  with secret noise: no insecure test seed."""
  c = default.get_config()
  c.update(num_steps=3, eval_every=0, checkpoint_every=0, workdir="")
  c.update(dataset="digits_public", public="stratified4", public_batch_size=16)
  c.update(check_per_example=False)
  c.privacy.target_epsilon = None
  c.estimator = name
  c.estimator_kwargs = {  # privacy settings are the privacy block's
    k: v
    for k, v in registry.get(name).defaults
    if k not in privacy_config.MOVED_KWARGS
  }
  c.privacy.clip = None  # the estimator's own default
  config_overrides.apply(c, dict(registry.get(name).run_settings))
  if registry.get(name).public_data is None:
    c.public = ""  # a task without a public split refuses one
  if name in ("pazo_p", "pazo_s"):
    c.estimator_kwargs["num_public_batches"] = 2
  if name == "gep":
    c.estimator_kwargs["num_bases"] = 2
  private = registry.get(name).private
  c.privacy.noise_multiplier = (
    (3.0 if c.privacy.sampling == "poisson" else 10.0) if private else None
  )
  c.mesh.data, c.mesh.fsdp = 2, 2
  _distributed(c)
  return c


if every_estimator:
  digests, private, sources = {}, {}, {}
  for name in sorted(registry.names()):
    result = train.train(_estimator_config(name), progress=False)
    digests[name] = result.get("params_sha256")
    private[name] = result.get("private")
    sources[name] = result["privacy_plan"].get("noise_source")
  # The same run again: a fresh OS-entropy secret, so other noise.
  again = train.train(_estimator_config("dpzero"), progress=False)
  with open(out, "w") as f:
    json.dump(
      {
        "process_index": jax.process_index(),
        "digests": digests,
        "private": private,
        "noise_sources": sources,
        "dpzero_again": again.get("params_sha256"),
      },
      f,
    )
  sys.exit(0)

config = default.get_config()
config.num_steps = 20
config.eval_every = 0
config.checkpoint_every = 10
config.workdir = workdir
config.privacy.target_epsilon = None
config.privacy.noise_multiplier = 1.0
config.insecure_test_noise = True  # the same noise in every launch
config.mesh.data, config.mesh.fsdp = 2, 2
_distributed(config)

# Record, per batch, the rows each process gathers and how many training
# examples it can see.
gathered = []
padded_batch = placement.sampling.padded_batch
placement.sampling.padded_batch = lambda arrays, index_batch: (
  gathered.append((len(index_batch.mask), len(arrays[1])))
  or padded_batch(arrays, index_batch)
)
if late_start and process_id == 1:
  connect = multihost.initialize
  multihost.initialize = lambda c: (connect(c), jax.devices(), time.sleep(40))
result = train.train(config, progress=False, stop_after=stop_after)
# A secret drawn here from OS entropy, shared from process 0: its digest
# (never the secret itself) must be the same on every process.
shared = multihost.share_secret(os.urandom(32))
report = {
  "process_index": jax.process_index(),
  "process_count": jax.process_count(),
  "local_devices": len(jax.local_devices()),
  **{k: result.get(k) for k in ("test_accuracy", "epsilon", "params_sha256")},
  "interrupted_at": result.get("interrupted_at"),
  "rows_gathered": gathered,
  "shared_secret_sha256": hashlib.sha256(shared).hexdigest(),
}
with open(out, "w") as f:
  json.dump(report, f)
