"""A zeroth-order run as (seed, scalars): a compact public log and its replay.

DP-ZO (Tang et al. 2024) Sec. 5: a two-point step moves the parameters
along ``g_t = (1/q) sum_j s_j u_j`` (DP-ZO Alg. 1 line 17, DPZero Alg. 2
line 3) where ``u_j`` is regenerated from the PUBLIC direction key and only
the ``q`` scalars ``s_j`` depend on the private data. The estimator state
holds exactly these scalars after each step (``EstimatorState.released``:
the directional derivatives, already divided by the smoothing and the
expected batch size, so ``g_t`` is :func:`~zoprivacy.estimators.two_point.
released_update` of them): ``4 q`` bytes per step (float32) plus a
constant header store the run.

:func:`~zoprivacy.training.replay.replay` (also ``trajectory.replay``)
rebuilds each ``g_t`` from ``(direction key, t, s_t)`` through training's
own function (``two_point.released_update``) and feeds it to the optimizer
that followed the estimator. For a chain whose state
depends only on the gradients it receives (sgd, momentum, adam, schedules)
the final parameters match training's (bit for bit with sgd;
``docs/trajectory.md``); one that reads private data or the loss cannot.

PRIVACY. The log is public post-processing of the released scalars, but
publishing it publishes every intermediate iterate: a run whose log is
published gets composition accounting only (the ledger's epsilon), never
the hidden-state final-iterate bound. The log holds no secret: no noise
key, no batch-sampler secret, no parameters (only their shapes and
dtypes), no data. File format (little-endian), version 1::

  magic     8 bytes   b"ZOTRAJ\\x00\\x01"
  length    4 bytes   uint32, byte length of the header
  header    length    UTF-8 JSON object, keys in HEADER_KEYS
  scalars   4 T q     float32 [T, q], row t = the scalars of step first_step+t
  digest    32 bytes  SHA-256 of everything before it
"""

from __future__ import annotations

import jax
import numpy as np

from zoprivacy.core import low_precision
from zoprivacy.estimators import base
from zoprivacy.training.replay import replay, replay_step_fn  # noqa: F401 (re-exported)
from zoprivacy.training.trajectory_format import (  # noqa: F401 (re-exported)
  FORMAT_VERSION,
  HEADER_KEYS,
  MAGIC,
  PRIVACY_NOTE,
  REPLAYABLE_ESTIMATORS,
  TrajectoryLog,
  TrajectoryLogError,
  params_signature,
  public_direction_hyperparameters,
)

_RESUME_HINTS = {
  "direction_prng": " Pass direction_prng={0!r} (the runner's "
  "--config.estimator_kwargs.direction_prng={0}) to continue with the "
  "generator the run started with."
}


def find_estimator_state(opt_state) -> base.EstimatorState:
  """The (single) :class:`EstimatorState` inside an optax chain state."""
  found = [
    s
    for s in jax.tree.leaves(
      opt_state, is_leaf=lambda x: isinstance(x, base.EstimatorState)
    )
    if isinstance(s, base.EstimatorState)
  ]
  if len(found) != 1:
    raise TrajectoryLogError(
      f"Expected one estimator state in the optimizer state, found "
      f"{len(found)}."
    )
  return found[0]


class TrajectoryLogger:
  """Appends each step's released scalars from the estimator state::

      logger = TrajectoryLogger(estimator="dpzero", estimator_kwargs=kw,
                                params=params)
      for t in ...:
        params, opt_state = step(params, opt_state, batch)
        logger.append(opt_state)
      logger.log().save(path)

  ``append`` keeps the device arrays and checks nothing on the host, so it
  never waits for the step; :meth:`log` gathers them (and checks that the
  steps were consecutive).
  """

  def __init__(
    self, *, estimator: str, estimator_kwargs: dict | None = None, params
  ):
    self._public = public_direction_hyperparameters(
      estimator, estimator_kwargs, params
    )
    self._estimator = estimator
    self._tree, self._leaves = params_signature(params)
    self._narrow = low_precision.has_narrow(params)
    self._key: tuple[str, list[int]] | None = None
    self._first_step: int | None = None
    self._rows: list[np.ndarray] = []
    self._pending: list[tuple[jax.Array, jax.Array]] = []

  def resume_from(self, log: TrajectoryLog) -> None:
    """Starts from a saved log (a run resumed at ``log``'s last step)."""
    if self._rows or self._pending:
      raise TrajectoryLogError("resume_from must come before append.")
    for name in ("estimator", "directions", "direction_prng", "num_queries"):
      mine = self._estimator if name == "estimator" else self._public[name]
      if log.header[name] != mine:
        raise TrajectoryLogError(
          f"The saved log has {name}={log.header[name]!r}, the run {mine!r}."
          + _RESUME_HINTS.get(name, "").format(log.header[name])
        )
    if [log.header["params_tree"], log.header["params_leaves"]] != [
      self._tree,
      self._leaves,
    ]:
      raise TrajectoryLogError("The saved log is of other parameters.")
    if self._narrow and log.update_rounding != "stochastic":
      raise TrajectoryLogError(
        f"The saved log rounded 16-bit updates {log.update_rounding!r}; "
        "this version rounds them stochastically, so one log cannot hold "
        "both: start a new log (a new run)."
      )
    self._key = (
      log.header["direction_key_impl"],
      log.header["direction_key_data"],
    )
    self._first_step = int(log.header["first_step"])
    self._rows = [np.asarray(log.scalars, np.float32)]

  def append(self, opt_state) -> None:
    """Records the step the estimator state has just taken."""
    state = find_estimator_state(opt_state)
    if self._key is None:
      key = state.direction_key
      self._key = (
        str(jax.random.key_impl(key)),
        [int(x) for x in np.asarray(jax.random.key_data(key)).ravel()],
      )
    self._pending.append((state.step, state.released))

  def _flush(self) -> None:
    q = self._public["num_queries"]
    for step, released in self._pending:
      released = np.asarray(released, np.float32).reshape(-1)
      if released.shape != (q,):
        raise TrajectoryLogError(
          f"The estimator released {released.shape[0]} scalars; the log "
          f"expects num_queries={q}."
        )
      taken = int(step) - 1  # ``step`` counts the updates taken
      if self._first_step is None:
        self._first_step = taken
      expected = self._first_step + sum(len(r) for r in self._rows)
      if taken != expected:
        raise TrajectoryLogError(
          f"Step {taken} appended where step {expected} was expected: "
          "append once after every step."
        )
      self._rows.append(released[None])
    self._pending = []

  def log(self) -> TrajectoryLog:
    self._flush()
    q = self._public["num_queries"]
    scalars = (
      np.concatenate(self._rows) if self._rows else np.zeros([0, q], np.float32)
    )
    if self._key is None:
      raise TrajectoryLogError(
        "No step appended: the direction key is unknown."
      )
    header = {
      "format_version": FORMAT_VERSION,
      "estimator": self._estimator,
      **self._public,
      "direction_key_impl": self._key[0],
      "direction_key_data": self._key[1],
      "params_tree": self._tree,
      "params_leaves": self._leaves,
      "first_step": int(self._first_step or 0),
      "num_steps": int(scalars.shape[0]),
      "privacy_note": PRIVACY_NOTE,
    }
    if self._narrow:  # how training stored them (zoprivacy.zo.rounding)
      header["update_rounding"] = "stochastic"
    return TrajectoryLog(header, scalars.astype(np.float32))
