"""The training loop of a resolved :class:`~experiments.run.resolved_run.Run`.

One step contract, no branch on the estimator: before each block of steps
the write-ahead ledger records them (:mod:`experiments.run.run_ledger`), then
each step draws its inputs and calls the one jitted step; hooks evaluate,
checkpoint and extend the trajectory log. Every file derived from the steps
(a metrics row, a checkpoint, ``result.json``) is written after a durable
ledger write that already counts them. A block has one attempt (how many
times its steps may already have been computed), and its batches and noise
come from that attempt's secret (:mod:`experiments.run.attempts`). A graceful
stop trims the reservation to the steps computed before it checkpoints.
"""

from __future__ import annotations

import signal
import threading
import time

import jax
import numpy as np

from experiments import xla_options
from experiments.run import metrics as metrics_lib
from experiments.run import (
  multihost,
  progress,
  run_ledger,
  trajectory_log,
)
from experiments.run.attempts import StepRandomness
from experiments.run.errors import RunInterrupted
from experiments.run.step import make_step, step_inputs
from experiments.run.training_signal import Signal


def _next_boundary(t: int, every: int | None) -> float:
  return (t // every + 1) * every if every else float("inf")


class Loop:
  """The state of a run between steps, and the loop's hooks."""

  def __init__(self, run, *, progress: bool = True):
    self.run = run
    self.progress = progress
    self.state = run.initial_state
    first = run.restored_step
    self.metrics = metrics_lib.MetricsWriter(
      run.workdir if run.primary else None
    )
    self.history = self.metrics.resume(first)
    self.seconds_offset = self.history[-1]["seconds"] if self.history else 0.0
    self.trajectory = trajectory_log.for_run(
      run.settings, self.state["params"], first
    )
    self.signal = Signal(run, first)  # released values' statistics
    self.reserved = first  # the ledger already counts steps before this
    self.randomness = StepRandomness(run)
    apply = xla_options.jit(run.task.apply)
    replicated = run.placement.replicated
    self.predict = lambda params, frozen, inputs: multihost.fetch(
      apply(params, frozen, replicated(inputs))
    )
    self.train_seconds = 0.0
    self.stop_requested = False  # Ctrl-C: stop after the current step
    self.private_evaluation = metrics_lib.evaluates_private_records(
      run.settings
    )

  # ------------------------------------------------------------- hooks
  def persist_ledger(self) -> None:
    if self.run.ledger is not None:
      self.run.ledger.save()

  def reserve(self, t: int, last: int) -> None:
    """Ledger hook: records steps ``t..`` (one attempt) durably before they
    run, and switches to that attempt's randomness."""
    if t < self.reserved:
      return
    settings, ledger = self.run.settings, self.run.ledger
    end = int(
      min(
        t + run_ledger.BLOCK,
        last,
        _next_boundary(t, settings.eval_every),
        _next_boundary(t, settings.checkpoint_every),
      )
    )
    attempt = 0
    if ledger is not None:
      attempt, end = ledger.attempt(t, end)
      end = t + ledger.reserve(self.run.plan, t, end - t)
    self.reserved = end
    self.state = self.randomness.use(attempt, self.state, t)

  def trim(self, done: int) -> None:
    """A graceful stop after step ``done``: the ledger drops, durably, the
    steps it reserved past it (never computed), before any checkpoint."""
    if self.run.ledger is not None:
      self.run.ledger.trim(done)
    self.reserved = min(self.reserved, done)

  def evaluate(self, done: int, seconds: float) -> dict:
    """Evaluation hook: one metrics row (after the ledger reaches disk)."""
    self.signal.check_params(self.state["params"], done)
    scores = metrics_lib.evaluate_task(
      self.run.task, self.predict, self.state["params"], self.run.frozen
    )
    if self.private_evaluation:  # never named a test metric
      scores = metrics_lib.as_private_validation(scores)
    row = {
      "step": done,
      **scores,
      "epsilon": self.run.epsilon(),
      "seconds": self.seconds_offset + seconds,
      **self.signal.row(),
    }
    self.history.append(row)
    self.persist_ledger()
    self.metrics.write(row)
    return row

  def checkpoint(self, done: int) -> None:
    """Checkpoint hook: the ledger, the signal's window and the trajectory
    log first, then the checkpoint. Everything a resume reads is thus on
    disk before the checkpoint that resumes from it commits: a kill at any
    point leaves a log that holds the checkpoint's steps (or more, which a
    resume truncates)."""
    ckpt = self.run.checkpointer
    if ckpt is None:
      return
    self.persist_ledger()
    self.signal.check_params(self.state["params"], done)
    self.signal.save(done)
    if self.run.primary:
      self.trajectory.save()
    ledger = self.run.ledger
    ckpt.save(
      done, self.state, None if ledger is None else ledger.ledger.to_dict()
    )

  def after_step(self, done: int, seconds: float, bar) -> None:
    settings = self.run.settings
    if settings.eval_every and done % settings.eval_every == 0:
      if done < settings.num_steps:
        row = self.evaluate(done, seconds)
        name = metrics_lib.metric_names(row)[0]
        bar.set_postfix(
          {name.removeprefix("test_"): f"{row[name]:.3f}"},
          eps=f"{row['epsilon']:.3f}",
        )
    if settings.checkpoint_every and done % settings.checkpoint_every == 0:
      self.checkpoint(done)

  # -------------------------------------------------------------- loop
  def run_steps(self, last: int) -> None:
    """Steps from the restored one up to ``last``. Ctrl-C stops at the end
    of the current step: checkpointed, then
    :class:`~experiments.run.errors.RunInterrupted` (a second Ctrl-C stops at
    once)."""
    step = make_step(self.run)
    previous = None
    if threading.current_thread() is threading.main_thread():
      previous = signal.signal(signal.SIGINT, self._on_ctrl_c)
    try:
      self._steps(step, int(self.state["step"]), last)
    finally:
      if previous is not None:
        signal.signal(signal.SIGINT, previous)

  def _on_ctrl_c(self, signum, frame) -> None:
    del signum, frame
    if self.stop_requested:
      raise KeyboardInterrupt
    self.stop_requested = True

  def _stop_if_asked(self, done: int) -> None:
    if self.stop_requested:
      self.trim(done)
      if self.run.settings.checkpoint_every:
        self.checkpoint(done)
      raise RunInterrupted(done)

  def _one_step(self, step, t: int, last: int):
    """Step ``t``: reserved in the ledger, its inputs drawn, computed;
    returns the new parameters."""
    run = self.run
    self.reserve(t, last)
    batch, public, noise = step_inputs(run, t, self.randomness)
    args = (
      self.state["params"], run.frozen, self.state["opt_state"],
      batch, public, noise,
    )  # fmt: skip
    self.randomness.before_step(step, args)
    params, opt_state, stats = step(*args)
    if run.placement.serialize_steps:
      jax.block_until_ready(params)
    self.state = dict(
      self.state,
      params=params,
      opt_state=opt_state,
      step=np.array(t + 1, np.int64),
    )
    self.trajectory.record(opt_state)
    self.signal.record(t + 1, stats)
    return params

  def _steps(self, step, first: int, last: int) -> None:
    bar, start = None, None
    try:
      progress.stage("compiling the step")
      for t in range(first, last):
        params = self._one_step(step, t, last)
        if start is None:  # the first step compiles: not timed
          jax.block_until_ready(params)
          start = time.time()
          bar = progress.training_bar(
            t + 1,
            self.run.settings.num_steps,
            self.run.settings.estimator,
            self.progress,
          )
        else:
          bar.update(1)
        self.after_step(t + 1, time.time() - start, bar)
        self._stop_if_asked(t + 1)
    finally:  # closed before any message (an interrupt's) is printed
      if start is not None:
        self.train_seconds = time.time() - start
        bar.close()
    self.signal.flush()
