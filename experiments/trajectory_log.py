r"""Replays or describes a run's trajectory log (the command).

::

  python -m experiments.trajectory_log replay \
      --log WORKDIR/trajectory.bin --config configs/default.py
  python -m experiments.trajectory_log info --log WORKDIR/trajectory.bin

``replay`` rebuilds the run's public initial parameters and optimizer from
the config, applies the logged released scalars
(:func:`zoprivacy.training.trajectory.replay`), and prints the test accuracy
and the SHA-256 of the replayed final parameters: the ``params_sha256`` of
the run's ``result.json``. The log itself is written by the runner
(:mod:`experiments.run.trajectory_log`).
"""

from __future__ import annotations

import json
import sys

import jax
import numpy as np

from experiments import tasks
from experiments.run import checkpointing, cli, resolution
from experiments.run import metrics as metrics_lib
from experiments.run.optimizers import make_optimizer
from zoprivacy.training import trajectory


def replay_run(config, log: trajectory.TrajectoryLog) -> dict:
  """Replays ``log`` from the config's public initial parameters."""

  if log.header["estimator"] != config.estimator:
    raise trajectory.TrajectoryLogError(
      f"The log is of {log.header['estimator']!r}, the config of "
      f"{config.estimator!r}."
    )
  if log.header["first_step"] != 0:
    raise trajectory.TrajectoryLogError("Replay from the config needs step 0.")
  task = tasks.get_task(config)
  trainable, frozen = task.init(jax.random.key(config.seed))
  settings, _ = resolution.resolve(config)
  params, _ = trajectory.replay(trainable, log, make_optimizer(settings))
  return {
    "num_steps": int(log.header["num_steps"]),
    **metrics_lib.evaluate_task(task, jax.jit(task.apply), params, frozen),
    "params_sha256": checkpointing.tree_digest(params),
    "log_sha256": log.digest(),
    "bytes_per_step": log.bytes_per_step,
    "file_bytes": len(log.to_bytes()),
  }


def _info(log: trajectory.TrajectoryLog) -> dict:
  scalars = log.scalars
  return {
    "header": log.header,
    "log_sha256": log.digest(),
    "bytes_per_step": log.bytes_per_step,
    "file_bytes": len(log.to_bytes()),
    "scalar_abs_mean": float(np.mean(np.abs(scalars))) if scalars.size else 0,
  }


def main(argv) -> None:
  from absl import flags  # pylint: disable=g-import-not-at-top

  del argv
  command = flags.FLAGS.command
  log = trajectory.TrajectoryLog.load(flags.FLAGS.log)
  if command == "info":
    out = _info(log)
  elif command == "replay":
    if _CONFIG.value is None:
      raise SystemExit("replay needs --config (the run's config file).")
    config = cli.apply_late_overrides(_CONFIG.value)
    out = replay_run(config, log)
  else:
    raise SystemExit(f"Unknown command {command!r}: use replay or info.")
  print(json.dumps(out, indent=2))


if __name__ == "__main__":
  from absl import app, flags  # pylint: disable=g-import-not-at-top

  # The runner's --config flag and its late overrides
  # (--config.estimator_kwargs.<k>, --config.<field>=None, an estimator
  # switch), so a replay takes the command line its run took.
  _CONFIG = cli.CONFIG
  flags.DEFINE_string("log", None, "Path of trajectory.bin.", required=True)
  flags.DEFINE_string("command", "replay", "replay or info.")
  # ``python -m experiments.trajectory_log replay --log ...``: the first
  # positional argument is the command.
  argv = list(sys.argv)
  if len(argv) > 1 and not argv[1].startswith("-"):
    argv = [argv[0], f"--command={argv[1]}", *argv[2:]]
  sys.argv = argv = cli.split_argv(argv)
  app.run(main, argv=argv)
