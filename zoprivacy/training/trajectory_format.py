"""The trajectory log's format: a header of public fields and the scalars.

The file format (:data:`MAGIC`, :data:`HEADER_KEYS`, a SHA-256 digest) and
what regenerates the public directions are in :class:`TrajectoryLog` and
:func:`public_direction_hyperparameters`; the logger that writes a log
during training and the overview are in :mod:`zoprivacy.training.trajectory`,
the replay in :mod:`zoprivacy.training.replay` (both read this module).
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

from zoprivacy.estimators import registry
from zoprivacy.zo import directions as directions_lib
from zoprivacy.zo import rounding

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
# Optional fields, all public: ``update_rounding`` ("stochastic"), how the
# 16-bit float leaves were stored after each update
# (:mod:`zoprivacy.zo.rounding`); written only when there are such leaves,
# absent ("nearest") in logs written before stochastic rounding.
OPTIONAL_HEADER_KEYS = frozenset(("update_rounding",))
PRIVACY_NOTE = (
  "publishing this log publishes every intermediate iterate: composition "
  "accounting only, no hidden-state (final-iterate) bound"
)


class TrajectoryLogError(ValueError):
  """A log that is corrupted, truncated, or does not fit the replay."""


def public_direction_hyperparameters(
  estimator: str, estimator_kwargs: dict | None = None, params=None
) -> dict[str, Any]:
  """``directions``, ``direction_prng``, ``num_queries`` of a scalar
  estimator: its keyword arguments over its registry defaults over its
  factory's signature defaults (what regenerates ``u_j``; a private
  estimator's ``num_queries`` is its privacy value's, given among
  ``estimator_kwargs``, 1 by default). With ``params``
  (arrays or shapes), ``direction_prng='auto'`` is resolved to the
  generator it chooses for them."""
  if estimator not in REPLAYABLE_ESTIMATORS:
    raise TrajectoryLogError(
      f"A trajectory log replays only the scalar estimators "
      f"{REPLAYABLE_ESTIMATORS}: their update is (1/q) sum_j s_j u_j of the "
      f"released scalars. {estimator!r} releases or updates otherwise (a "
      "vector, its norm, public-data terms, a recursion over past steps), "
      "so its run cannot be stored as (seed, scalars)."
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
    "num_queries": int(values.get("num_queries", 1)),
  }


def params_signature(params) -> tuple[str, list[list]]:
  """The tree structure and ``[shape, dtype]`` of each leaf: never values."""
  leaves, treedef = jax.tree.flatten(params)
  return str(treedef), [
    [list(np.shape(x)), str(jnp.result_type(x))] for x in leaves
  ]


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

  @property
  def update_rounding(self) -> str:
    """How the 16-bit float leaves were stored after each update
    (:data:`zoprivacy.zo.rounding.MODES`)."""
    return str(self.header.get("update_rounding", "nearest"))

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
  extra = sorted(set(header) - HEADER_KEYS - OPTIONAL_HEADER_KEYS)
  missing = sorted(HEADER_KEYS - set(header))
  if extra or missing:
    raise TrajectoryLogError(
      f"Trajectory header fields: unexpected {extra}, missing {missing}."
    )
  if header.get("update_rounding", "nearest") not in rounding.MODES:
    raise TrajectoryLogError(
      f"Trajectory update_rounding {header['update_rounding']!r}; this "
      f"reads {rounding.MODES}."
    )
  if header["format_version"] != FORMAT_VERSION:
    raise TrajectoryLogError(
      f"Trajectory format {header['format_version']}; this reads "
      f"{FORMAT_VERSION}."
    )
  public_direction_hyperparameters(header["estimator"])
