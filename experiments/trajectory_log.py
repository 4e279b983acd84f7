r"""The runner's trajectory log (``config.trajectory_log``) and its replay.

With ``config.trajectory_log = True`` (and a ``workdir``), a run of a scalar
estimator (mezo, dpzero, dp_zo) writes ``workdir/trajectory.bin``: the
public direction key and the ``q`` released scalars of every step
(:mod:`zoprivacy.training.trajectory`, DP-ZO Sec. 5). It is saved with every
checkpoint and at the end; a resumed run continues it.

Replaying it needs only the log and the config (initial parameters from the
public seed, the optimizer by name)::

  python -m experiments.trajectory_log replay \
      --log WORKDIR/trajectory.bin --config configs/default.py
  python -m experiments.trajectory_log info --log WORKDIR/trajectory.bin

``replay`` prints the test accuracy and the SHA-256 of the replayed final
parameters: the ``params_sha256`` of the run's ``result.json``.

Publishing the log publishes every intermediate iterate: the run gets the
ledger's composition epsilon only, never a final-iterate (hidden-state)
bound.
"""

from __future__ import annotations

import json
import os
import sys

import jax
import numpy as np

from zoprivacy.training import trajectory

FILE_NAME = "trajectory.bin"


class _NoLog:
  """``config.trajectory_log`` off: every hook does nothing."""

  def record(self, opt_state) -> None:
    del opt_state

  def save(self) -> None:
    pass


class RunTrajectory:
  """The log of one run in its workdir: ``record`` after each step,
  ``save`` with each checkpoint."""

  def __init__(self, config, params, first_step: int):
    self.path = os.path.join(config.workdir, FILE_NAME)
    self.logger = trajectory.TrajectoryLogger(
      estimator=config.estimator,
      estimator_kwargs=dict(config.estimator_kwargs),
      params=params,
    )
    if first_step:  # resumed: the log up to the checkpoint goes on
      if not os.path.exists(self.path):
        raise trajectory.TrajectoryLogError(
          f"Resuming at step {first_step} with trajectory_log set, but "
          f"{self.path} is missing: the log cannot be completed."
        )
      saved = trajectory.TrajectoryLog.load(self.path)
      if saved.header["first_step"] != 0 or saved.scalars.shape[0] < first_step:
        raise trajectory.TrajectoryLogError(
          f"{self.path} holds steps {saved.header['first_step']}.."
          f"{saved.header['first_step'] + saved.scalars.shape[0]}; the "
          f"checkpoint is at step {first_step}."
        )
      self.logger.resume_from(saved.truncated(first_step))

  def record(self, opt_state) -> None:
    self.logger.append(opt_state)

  def save(self) -> None:
    self.logger.log().save(self.path)


def for_run(config, params, first_step: int):
  """The run's log hooks: a :class:`RunTrajectory` when
  ``config.trajectory_log`` is set, otherwise hooks that do nothing."""
  if not config.get("trajectory_log"):
    return _NoLog()
  if not config.get("workdir"):
    raise ValueError("trajectory_log needs a workdir to write the log to.")
  trajectory.public_direction_hyperparameters(config.estimator)  # or refuse
  return RunTrajectory(config, params, first_step)


def replay_run(config, log: trajectory.TrajectoryLog) -> dict:
  """Replays ``log`` from the config's public initial parameters."""
  # Imported here: ``train`` imports this module for its hooks.
  from experiments import checkpointing, tasks  # pylint: disable=g-import-not-at-top
  from experiments import metrics as metrics_lib  # pylint: disable=g-import-not-at-top
  from experiments.optimizers import make_optimizer  # pylint: disable=g-import-not-at-top
  from zoprivacy.estimators import registry  # pylint: disable=g-import-not-at-top

  if log.header["estimator"] != config.estimator:
    raise trajectory.TrajectoryLogError(
      f"The log is of {log.header['estimator']!r}, the config of "
      f"{config.estimator!r}."
    )
  if log.header["first_step"] != 0:
    raise trajectory.TrajectoryLogError("Replay from the config needs step 0.")
  task = tasks.get_task(config)
  trainable, frozen = task.init(jax.random.key(config.seed))
  params, _ = trajectory.replay(
    trainable, log, make_optimizer(config, spec=registry.get(config.estimator))
  )
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
    config = _CONFIG.value
    if config is None:
      raise SystemExit("replay needs --config (the run's config file).")
    out = replay_run(config, log)
  else:
    raise SystemExit(f"Unknown command {command!r}: use replay or info.")
  print(json.dumps(out, indent=2))


if __name__ == "__main__":
  from absl import app, flags  # pylint: disable=g-import-not-at-top
  from ml_collections import config_flags  # pylint: disable=g-import-not-at-top

  _CONFIG = config_flags.DEFINE_config_file(
    "config", None, "The run's configs/<name>.py file.", lock_config=True
  )
  flags.DEFINE_string("log", None, "Path of trajectory.bin.", required=True)
  flags.DEFINE_string("command", "replay", "replay or info.")
  # ``python -m experiments.trajectory_log replay --log ...``: the first
  # positional argument is the command.
  argv = list(sys.argv)
  if len(argv) > 1 and not argv[1].startswith("-"):
    argv = [argv[0], f"--command={argv[1]}", *argv[2:]]
  app.run(main, argv=argv)
