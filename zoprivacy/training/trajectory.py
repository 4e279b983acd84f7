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

import dataclasses
import hashlib
import inspect
import json
import os
import struct
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.estimators import base, registry
from zoprivacy.zo import directions as directions_lib

FORMAT_VERSION = 1
MAGIC = b"ZOTRAJ\x00\x01"
_DIGEST_BYTES = 32
# The scalar estimators: their update is released_update(released).
REPLAYABLE_ESTIMATORS = ("mezo", "dpzero", "dp_zo")
# Every header field, all public. A log with any other key is refused.
HEADER_KEYS = frozenset(
  (
    "format_version",
    "estimator",
    "directions",
    "direction_prng",
    "num_queries",
    "direction_key_impl",
    "direction_key_data",
    "params_tree",
    "params_leaves",
    "first_step",
    "num_steps",
    "privacy_note",
  )
)
PRIVACY_NOTE = (
  "publishing this log publishes every intermediate iterate: composition "
  "accounting only, no hidden-state (final-iterate) bound"
)


_RESUME_HINTS = {
  "direction_prng": " Pass direction_prng={0!r} (the runner's "
  "--config.estimator_kwargs.direction_prng={0}) to continue with the "
  "generator the run started with."
}


class TrajectoryLogError(ValueError):
  """A log that is corrupted, truncated, or does not fit the replay."""


def public_direction_hyperparameters(
  estimator: str, estimator_kwargs: dict | None = None, params=None
) -> dict[str, Any]:
  """``directions``, ``direction_prng``, ``num_queries`` of a scalar
  estimator: its keyword arguments over its registry defaults over its
  factory's signature defaults (what regenerates ``u_j``). With ``params``
  (arrays or shapes), ``direction_prng='auto'`` is resolved to the
  generator it chooses for them."""
  if estimator not in REPLAYABLE_ESTIMATORS:
    raise TrajectoryLogError(
      f"A trajectory log replays only the scalar estimators "
      f"{REPLAYABLE_ESTIMATORS}: their update is (1/q) sum_j s_j u_j of the "
      f"released scalars. {estimator!r} releases something else (a vector, "
      "its norm, or public-data terms), so its run cannot be stored as "
      "(seed, scalars)."
    )
  spec = registry.get(estimator)
  values = {
    k: p.default
    for k, p in inspect.signature(spec.factory).parameters.items()
    if p.default is not inspect.Parameter.empty
  }
  values.update(spec.defaults)
  values.update(dict(estimator_kwargs or {}))
  return {
    "directions": str(values["directions"]),
    # What draws u: 'auto' is recorded as the generator it chose for these
    # parameters (threefry or the counter hash, by size), so that a replay
    # regenerates the same u whatever a later version's default is.
    "direction_prng": directions_lib.generator(
      str(values["direction_prng"]), params
    )
    if params is not None
    else str(values["direction_prng"]),
    "num_queries": int(values["num_queries"]),
  }


def params_signature(params) -> tuple[str, list[list]]:
  """The tree structure and ``[shape, dtype]`` of each leaf: never values."""
  leaves, treedef = jax.tree.flatten(params)
  return str(treedef), [
    [list(np.shape(x)), str(jnp.result_type(x))] for x in leaves
  ]


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


@dataclasses.dataclass(frozen=True)
class TrajectoryLog:
  """A header of public fields and the scalars ``[num_steps, q]`` float32."""

  header: dict[str, Any]
  scalars: np.ndarray

  @property
  def num_queries(self) -> int:
    return int(self.header["num_queries"])

  @property
  def bytes_per_step(self) -> int:
    """``4 q``: one float32 per released scalar."""
    return 4 * self.num_queries

  def direction_key(self) -> jax.Array:
    data = np.asarray(self.header["direction_key_data"], np.uint32)
    return jax.random.wrap_key_data(
      data, impl=self.header["direction_key_impl"]
    )

  def truncated(self, num_steps: int) -> TrajectoryLog:
    """The first ``num_steps`` steps (a run resumed from a checkpoint)."""
    header = dict(self.header, num_steps=int(num_steps))
    return TrajectoryLog(header, self.scalars[:num_steps])

  def to_bytes(self) -> bytes:
    header = dict(self.header, num_steps=int(self.scalars.shape[0]))
    _check_header(header)
    text = json.dumps(header, sort_keys=True).encode("utf-8")
    scalars = np.ascontiguousarray(self.scalars, dtype="<f4")
    body = MAGIC + struct.pack("<I", len(text)) + text + scalars.tobytes()
    return body + hashlib.sha256(body).digest()

  @classmethod
  def from_bytes(cls, raw: bytes) -> TrajectoryLog:
    if len(raw) < len(MAGIC) + 4 + _DIGEST_BYTES or not raw.startswith(MAGIC):
      raise TrajectoryLogError("Not a trajectory log (bad magic or too short).")
    body, digest = raw[:-_DIGEST_BYTES], raw[-_DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
      raise TrajectoryLogError(
        "Trajectory log digest mismatch: the file is corrupted or truncated."
      )
    (length,) = struct.unpack("<I", body[len(MAGIC) : len(MAGIC) + 4])
    start = len(MAGIC) + 4
    try:
      header = json.loads(body[start : start + length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
      raise TrajectoryLogError(f"Unreadable trajectory header: {e}") from e
    _check_header(header)
    payload = body[start + length :]
    q, steps = int(header["num_queries"]), int(header["num_steps"])
    if len(payload) != 4 * q * steps:
      raise TrajectoryLogError(
        f"The log holds {len(payload)} bytes of scalars; its header "
        f"announces {steps} steps of {q} float32 ({4 * q * steps} bytes)."
      )
    scalars = np.frombuffer(payload, dtype="<f4").reshape(steps, q)
    return cls(header, scalars.astype(np.float32))

  def digest(self) -> str:
    """SHA-256 (hex) of the saved file."""
    return hashlib.sha256(self.to_bytes()).hexdigest()

  def save(self, path: str) -> None:
    """Writes the file atomically (a temporary file, then a rename)."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
      f.write(self.to_bytes())
    os.replace(tmp, path)

  @classmethod
  def load(cls, path: str) -> TrajectoryLog:
    with open(path, "rb") as f:
      return cls.from_bytes(f.read())


def _check_header(header: dict) -> None:
  if not isinstance(header, dict):
    raise TrajectoryLogError("The trajectory header is not a JSON object.")
  extra = sorted(set(header) - HEADER_KEYS)
  missing = sorted(HEADER_KEYS - set(header))
  if extra or missing:
    raise TrajectoryLogError(
      f"Trajectory header fields: unexpected {extra}, missing {missing}."
    )
  if header["format_version"] != FORMAT_VERSION:
    raise TrajectoryLogError(
      f"Trajectory format {header['format_version']}; this reads "
      f"{FORMAT_VERSION}."
    )
  public_direction_hyperparameters(header["estimator"])


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
    return TrajectoryLog(header, scalars.astype(np.float32))


def __getattr__(name: str):
  # replay and replay_step_fn live in zoprivacy.training.replay (which reads
  # this module's log); imported on first use so neither imports the other
  # at load time.
  if name in ("replay", "replay_step_fn"):
    from zoprivacy.training import replay as replay_module

    return getattr(replay_module, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
