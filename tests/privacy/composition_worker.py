"""One launch of a run for the composition audit, recording every release.

``python composition_worker.py SPEC_JSON``. The spec names a config module
(``configs/<config>.py``) and its overrides, the simulated devices, an
optional multi-process setting, and ``kill_at``: after recording step
``kill_at`` the process SIGKILLs itself (a real kill, at a known step).

Every computed step appends one JSON line to ``spec["record"]`` (flushed at
once, so a killed launch keeps its lines): the step, the process, the
released values, the exact integer noise the step received and a digest of
its Poisson batch (the sampled indices). The audit
(``test_composition_audit.py``) checks them against the workdir.
``control="reuse_randomness"`` gives every attempt the run secret itself
(a replay reusing its noise and batch): the audit must catch it.
"""

import json
import os
import signal
import sys

SPEC = json.loads(sys.argv[1])
os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "")
  + f" --xla_force_host_platform_device_count={SPEC.get('devices', 1)}"
)

import importlib  # noqa: E402

import release_recorder  # noqa: E402

from experiments import tune  # noqa: E402
from experiments.run import train  # noqa: E402
from experiments.tuning import budget, search  # noqa: E402
from zoprivacy.privacy import randomness  # noqa: E402


def _config():
  config = importlib.import_module(f"configs.{SPEC['config']}").get_config()
  for key, value in SPEC.get("overrides", {}).items():
    *parents, leaf = key.split(".")
    target = config
    for part in parents:
      target = target[part]
    target[leaf] = value
  d = SPEC.get("distributed")
  if d:
    config.distributed.update(
      enabled=True,
      coordinator_address=f"localhost:{d['port']}",
      num_processes=d["num_processes"],
      process_id=d["process_id"],
      cpu_collectives="gloo",
    )
  return config


def _write(out):
  def sink(record):
    out.write(json.dumps(record) + "\n")
    out.flush()
    os.fsync(out.fileno())

  return sink


def _kill_after(record):
  if record["step"] + 1 == SPEC.get("kill_at"):
    os.kill(os.getpid(), signal.SIGKILL)


if SPEC.get("control") == "reuse_randomness":  # the audit's negative control
  randomness.attempt_secret = lambda secret, attempt: secret


def _train(config):
  train.train(config, progress=False)


def _tune(config):
  """The tuner on the config: two trials (the secret count fixed here) over
  two step sizes, their steps recorded as a run's."""

  budget.draw_trial_count = lambda secret, count: 2
  space = search.from_flags({"learning_rate": "0.01,0.02"})
  tune.tune(config, space, budget.trial_count("poisson", 3.0))


# What a launch runs: ``spec["entry"]``.
ENTRIES = {"train": _train, "tune": _tune}

with open(SPEC["record"], "a") as f:
  release_recorder.install(None, _write(f), SPEC["launch"], _kill_after)
  ENTRIES[SPEC.get("entry", "train")](_config())
