"""A workdir belongs to one configuration: resuming with another is refused.

The first run in a workdir writes ``config.json`` (the configuration and its
SHA-256 fingerprint). A later run in the same workdir must have the same
fingerprint, or it is refused before anything (checkpoint, ledger, metrics)
is read or written, with the differing fields listed. ``resume='force'``
resumes anyway; a new workdir starts afresh.

Fields that do not change what a run computes or spends (where it writes,
how often it evaluates, checkpoints or prints) are left out of the
fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os

IGNORED = (
  "workdir",
  "eval_every",
  "checkpoint_every",
  "resume",
  "check_per_example",
  "distributed",  # how the job is launched (coordinator, process ids)
)


class ConfigMismatchError(ValueError):
  """The workdir holds a run of a different configuration."""


def _flat(d, prefix=""):
  out = {}
  for k, v in d.items():
    if isinstance(v, dict):
      out.update(_flat(v, f"{prefix}{k}."))
    else:
      out[f"{prefix}{k}"] = v
  return out


def fingerprint(config_dict: dict) -> tuple[str, dict]:
  flat = {
    k: v
    for k, v in _flat(config_dict).items()
    if k.split(".")[0] not in IGNORED
  }
  text = json.dumps(flat, sort_keys=True, default=str)
  return hashlib.sha256(text.encode()).hexdigest(), json.loads(text)


def claim(
  workdir: str, config_dict: dict, resume: str = "", *, write: bool = True
) -> None:
  """Records the config in ``workdir``, or checks it against the recorded one.

  ``write=False`` only checks (the processes of a multi-host run other than
  the first: every process refuses a mismatch, one writes)."""
  digest, flat = fingerprint(config_dict)
  path = os.path.join(workdir, "config.json")
  if os.path.exists(path):
    with open(path) as f:
      recorded = json.load(f)
    if recorded["fingerprint"] != digest and resume != "force":
      old = recorded["config"]
      keys = sorted(set(old) | set(flat))
      diffs = [
        f"  {k}: {old.get(k, '<unset>')!r} -> {flat.get(k, '<unset>')!r}"
        for k in keys
        if old.get(k) != flat.get(k)
      ]
      raise ConfigMismatchError(
        f"{workdir} holds a run of a different configuration; resuming it "
        "would mix two runs (and their privacy ledgers). Differences:\n"
        + "\n".join(diffs)
        + "\nUse a new workdir, or --resume=force to "
        "resume anyway."
      )
    if recorded["fingerprint"] == digest:
      return
  if not write:
    return
  os.makedirs(workdir, exist_ok=True)
  with open(path, "w") as f:
    json.dump(
      {"fingerprint": digest, "config": flat}, f, indent=2, sort_keys=True
    )
