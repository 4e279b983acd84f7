"""Checkpoints that resume a private run exactly where it stopped.

A checkpoint holds everything the next step depends on:

* the parameters and the optimizer state (which holds the estimator's public
  direction key and its SECRET noise key);
* the step, which is also the samplers' position;
* the run's 256-bit SECRET (Poisson sampling and exact noise streams), from
  which every attempt of a step derives its batch and noise (a step
  computed again after a crash draws fresh ones:
  :mod:`experiments.run.run_ledger`'s replay rule);
* the privacy ledger, as JSON, so epsilon keeps counting across restarts.

A checkpoint is therefore secret material: whoever reads it can regenerate
the noise. Its folders are created 0700 and its files made 0600 after each
save, whatever the umask (the checkpoint folder is 0700 before orbax writes
anything in it, so nothing in it is readable by others at any time). Never
publish or share it; publish ``result.json``, the metrics and the ledger,
which hold no secret.

Arrays are written with orbax. A manifest stores a SHA-256 digest of every
array and of the ledger; a restore that does not reproduce the digests raises
:class:`CorruptCheckpointError` instead of loading silently.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import jax
import numpy as np

from experiments.run import multihost


class CorruptCheckpointError(RuntimeError):
  """A checkpoint exists but cannot be read back intact."""


def _is_key(x) -> bool:
  return isinstance(x, jax.Array) and jax.dtypes.issubdtype(
    x.dtype, jax.dtypes.prng_key
  )


def _to_storable(tree):
  """The leaves as a flat ``{index: array}`` dict; typed PRNG keys become
  their raw uint32 data. The tree structure (including the static privacy
  plan) comes from the template at restore time."""
  leaves = jax.tree.leaves(tree)
  return {
    f"{i:05d}": jax.random.key_data(x) if _is_key(x) else x
    for i, x in enumerate(leaves)
  }


def _from_storable(stored, template):
  leaves, treedef = jax.tree.flatten(template)
  out = []
  for i, t in enumerate(leaves):
    s = stored[f"{i:05d}"]
    out.append(
      jax.random.wrap_key_data(s, impl=jax.random.key_impl(t))
      if _is_key(t)
      else s
    )
  return jax.tree.unflatten(treedef, out)


def tree_digest(tree) -> str:
  """SHA-256 over the shapes, dtypes and bytes of every leaf, in tree order."""
  h = hashlib.sha256()
  stored = _to_storable(tree)
  for name in sorted(stored):
    leaf = stored[name]
    a = multihost.fetch(leaf)
    h.update(f"{a.shape}{a.dtype}".encode())
    h.update(np.ascontiguousarray(a).tobytes())
  return h.hexdigest()


def restrict_permissions(directory: str) -> None:
  """Folders 0700 and files 0600 under ``directory``, whatever the umask."""
  os.chmod(directory, 0o700)
  for root, dirs, files in os.walk(directory):
    for name in dirs:
      os.chmod(os.path.join(root, name), 0o700)
    for name in files:
      path = os.path.join(root, name)
      if not os.path.islink(path):
        os.chmod(path, 0o600)


def _orbax():
  """``orbax.checkpoint``, imported on first use: it takes about a second
  to import, and a run without a workdir never checkpoints."""
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

  return ocp


class Checkpointer:
  """Saves and restores ``(train_state, ledger_dict)`` under ``directory``."""

  def __init__(self, directory: str, *, max_to_keep: int = 2):
    ocp = _orbax()
    self.directory = os.path.abspath(directory)
    os.makedirs(self.directory, mode=0o700, exist_ok=True)
    os.chmod(self.directory, 0o700)  # secret material: owner only
    self._manager = ocp.CheckpointManager(
      self.directory,
      options=ocp.CheckpointManagerOptions(
        max_to_keep=max_to_keep, create=True
      ),
    )

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def save(self, step: int, train_state: Any, ledger: dict | None) -> None:
    ocp = _orbax()
    manifest = {
      "step": int(step),
      "state_sha256": tree_digest(train_state),
      "num_leaves": len(jax.tree.leaves(train_state)),
      "ledger": ledger,
      "ledger_sha256": hashlib.sha256(
        json.dumps(ledger, sort_keys=True).encode()
      ).hexdigest(),
    }
    self._manager.save(
      step,
      args=ocp.args.Composite(
        state=ocp.args.StandardSave(_to_storable(train_state)),
        manifest=ocp.args.JsonSave(manifest),
      ),
    )
    self._manager.wait_until_finished()
    restrict_permissions(self.directory)

  def restore(self, step: int, template: Any) -> tuple[Any, dict | None]:
    """Restores step ``step`` into the structure of ``template``."""
    ocp = _orbax()
    abstract = jax.tree.map(
      ocp.utils.to_shape_dtype_struct, _to_storable(template)
    )
    try:
      manifest = self._manager.restore(
        step, args=ocp.args.Composite(manifest=ocp.args.JsonRestore())
      )["manifest"]
    except Exception as e:  # orbax raises many types for damaged files.
      raise CorruptCheckpointError(
        f"Checkpoint {step} in {self.directory} has no readable manifest: "
        f"{type(e).__name__}: {e}"
      ) from e
    if not isinstance(manifest, dict) or manifest.get("num_leaves") != len(
      abstract
    ):
      raise CorruptCheckpointError(
        f"Checkpoint {step} in {self.directory} does not hold the state this "
        "run needs (its secret noise and sampling keys may be missing: a "
        "checkpoint without them is refused, never silently re-seeded)."
      )
    try:
      restored = self._manager.restore(
        step,
        args=ocp.args.Composite(
          state=ocp.args.StandardRestore(abstract),
          manifest=ocp.args.JsonRestore(),
        ),
      )
    except Exception as e:  # orbax raises many types for damaged files.
      raise CorruptCheckpointError(
        f"Checkpoint {step} in {self.directory} cannot be read: "
        f"{type(e).__name__}: {e}"
      ) from e
    manifest = restored["manifest"]
    state = _from_storable(restored["state"], template)
    if not isinstance(manifest, dict) or manifest.get("step") != step:
      raise CorruptCheckpointError(
        f"Checkpoint {step} in {self.directory} has a missing or mismatched manifest."
      )
    if tree_digest(state) != manifest.get("state_sha256"):
      raise CorruptCheckpointError(
        f"Checkpoint {step} in {self.directory}: array contents do not match "
        "the digest written with them (the files were damaged or replaced)."
      )
    ledger = manifest.get("ledger")
    if hashlib.sha256(
      json.dumps(ledger, sort_keys=True).encode()
    ).hexdigest() != manifest.get("ledger_sha256"):
      raise CorruptCheckpointError(
        f"Checkpoint {step} in {self.directory}: the privacy ledger does not "
        "match its digest."
      )
    return state, ledger

  def close(self) -> None:
    self._manager.close()
