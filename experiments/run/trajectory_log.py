r"""The runner's trajectory log (``config.trajectory_log``).

With ``config.trajectory_log = True`` (and a ``workdir``), a run of a scalar
estimator (mezo, dpzero, dp_zo) writes ``workdir/trajectory.bin``: the
public direction key and the ``q`` released scalars of every step
(:mod:`zoprivacy.training.trajectory`, DP-ZO Sec. 5). It is saved with every
checkpoint and at the end; a resumed run continues it.

Replaying it needs only the log and the config (initial parameters from the
public seed, the optimizer by name), with the command
:mod:`experiments.trajectory_log`::

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

import os

from experiments.run.settings import Settings, thaw
from zoprivacy.training import trajectory

FILE_NAME = "trajectory.bin"


class _NoLog:
  """``config.trajectory_log`` off: every hook does nothing."""

  def record(self, opt_state) -> None:
    del opt_state

  def save(self) -> None:
    pass


def _direction_kwargs(settings: Settings) -> dict:
  """The estimator's keywords, with the queries per step of a private
  estimator (its privacy block's ``num_queries``; MeZO's is its own
  keyword, which comes first)."""
  kwargs = thaw(settings.estimator_kwargs)
  kwargs.setdefault("num_queries", settings.privacy.base.num_queries)
  return kwargs


class RunTrajectory:
  """The log of one run in its workdir: ``record`` after each step,
  ``save`` with each checkpoint."""

  def __init__(self, settings: Settings, params, first_step: int):
    self.path = os.path.join(settings.workdir, FILE_NAME)
    self.logger = trajectory.TrajectoryLogger(
      estimator=settings.estimator,
      estimator_kwargs=_direction_kwargs(settings),
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


def for_run(settings: Settings, params, first_step: int):
  """The run's log hooks: a :class:`RunTrajectory` when
  ``config.trajectory_log`` is set, otherwise hooks that do nothing."""
  if not settings.trajectory_log:
    return _NoLog()
  if not settings.workdir:
    raise ValueError("trajectory_log needs a workdir to write the log to.")
  trajectory.public_direction_hyperparameters(settings.estimator)  # or refuse
  return RunTrajectory(settings, params, first_step)
