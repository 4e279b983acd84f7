"""A workdir belongs to one configuration: resuming with another is refused.

The first run in a workdir writes ``config.json`` (the configuration and its
SHA-256 fingerprint). A later run in the same workdir must have the same
fingerprint, or it is refused before anything (checkpoint, ledger, metrics)
is read or written, with the differing fields listed. ``resume='force'``
resumes anyway; a new workdir starts afresh.

Fields that do not change what a run computes or spends (where it writes,
how often it evaluates, checkpoints or prints) are left out of the
fingerprint.

A workdir is the run's own (:func:`check_own`): an existing folder is taken
only if it is empty, holds a previous run of the same kind (a run's, or a
tuning's, ``config.json``: the fingerprint check above then decides), or
holds only files a run of that kind writes (one killed before its
``config.json``). Any other folder (``/``, a home folder, a model's folder
with its own ``config.json``) is refused before anything is written.

A workdir written by an earlier release, whose config kept the privacy
settings at the top level (``target_epsilon``, ``exact_noise``,
``estimator_kwargs.clip``, ...), is read in the ``privacy`` block's names
(:func:`normalized`): the same run resumes, and its ``config.json`` is
rewritten in the new form; a differing one is refused as any other.
"""

from __future__ import annotations

import hashlib
import json
import os

from experiments.run import privacy_config

IGNORED = (
  "workdir",
  "eval_every",
  "checkpoint_every",
  "resume",
  "check_per_example",
  "distributed",  # how the job is launched (coordinator, process ids)
  "physical_batch_size",  # how a step is executed, not what it releases
)


# What each kind of workdir holds at its top level (and temporary files
# replacing them, :func:`_written_by`). tests/experiments/test_workdir_owner.py checks that
# a run writes nothing else.
ENTRIES = {
  "run": frozenset(
    {
      "config.json",
      "private",  # the run's secret, its lock
      "privacy_ledger.json",
      "checkpoints",
      "metrics.csv",
      "metrics.jsonl",
      "tensorboard",
      "trajectory.bin",
      "released_signal.json",
      "report.png",
      "result.json",
    }
  ),
  "tuning": frozenset(
    {"config.json", "secret", "result.json", "model.msgpack"}
  ),
}
KIND_NAMES = {"run": "a run", "tuning": "a tuning (experiments.tune)"}

# What the privacy block's fields meant when an earlier release's config
# did not name them: each factory's own default (clip: the estimator's).
LEGACY_DEFAULTS = {
  "privacy.clip": None,
  "privacy.noise": "exact",
  "privacy.grid_points": 1024,
  "privacy.neighboring": "add_or_remove",
  "privacy.num_queries": 1,
  "privacy.mechanism": "gaussian",
}


# Fields added to configs/default.py since a workdir may have been written,
# at the value that leaves an earlier run's computation unchanged.
ADDED = {"num_epochs": None}


class ConfigMismatchError(ValueError):
  """The workdir holds a run of a different configuration."""


class WorkdirNotOwnedError(ValueError):
  """The workdir is a folder that holds something other than a run."""


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


def _record(path: str) -> dict | None:
  """``config.json``'s record if :func:`claim` wrote it, else None."""
  try:
    with open(path) as f:
      record = json.load(f)
  except (OSError, ValueError):
    return None
  if not isinstance(record, dict) or set(record) != {"fingerprint", "config"}:
    return None
  return record if isinstance(record["config"], dict) else None


def _kind(record: dict) -> str:
  return (
    "tuning"
    if any(k.startswith("tuning.") for k in record["config"])
    else "run"
  )


def _written_by(name: str, own: frozenset[str]) -> bool:
  """``name`` is one of ``own``, or a temporary file replacing one
  (``metrics.csv.tmp``, ``privacy_ledger.json.k3j9.tmp``)."""
  if name in own:
    return True
  stem = name.removesuffix(".tmp")
  return stem != name and any(stem.startswith(o) for o in own)


def check_own(workdir: str, kind: str = "run") -> None:
  """Refuses ``workdir`` unless it is missing, empty, or holds a previous
  ``kind`` of work (``'run'`` or ``'tuning'``): see the module's docstring.
  Reads only; writes nothing."""
  if not os.path.isdir(workdir):
    return  # missing (made later) or a file (refused by the caller)
  names = sorted(os.listdir(workdir))
  if not names:
    return
  what = KIND_NAMES[kind]
  if "config.json" in names:
    record = _record(os.path.join(workdir, "config.json"))
    if record is None:
      raise WorkdirNotOwnedError(
        f"workdir {workdir!r} holds a config.json that no run or tuning "
        f"wrote (another program's folder?): it is not {what}'s workdir. "
        "A workdir is the run's own; choose a new or empty folder."
      )
    held = _kind(record)
    if held != kind:
      raise WorkdirNotOwnedError(
        f"workdir {workdir!r} holds {KIND_NAMES[held]}, not {what}; "
        f"{what} cannot resume or take it over (--resume=force either): "
        "the two write different files and keep different secrets. "
        "Choose a new or empty folder."
      )
    return
  own = ENTRIES[kind]
  foreign = [n for n in names if not _written_by(n, own)]
  if foreign:
    shown = ", ".join(foreign[:5])
    more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
    raise WorkdirNotOwnedError(
      f"workdir {workdir!r} is a folder that holds no previous run ({shown}"
      f"{more}): {what} would write its config, metrics, secret and "
      "checkpoints among these files. A workdir is the run's own: choose a "
      "new or empty folder."
    )


def with_added(old: dict, new: dict) -> dict:
  """The flat config ``old`` with the fields added since it was written
  (:data:`ADDED`, which ``new`` has) at their value then."""
  return {**{k: v for k, v in ADDED.items() if k in new}, **old}


def normalized(old: dict, new: dict) -> dict:
  """The flat config ``old`` of an earlier release in the privacy block's
  names (``new``: the flat config of this run, which says which
  ``estimator_kwargs`` its estimator still takes), a Noisy-ZOGD run's
  with the noise it ran under (:func:`privacy_config.normalized_setting`)."""
  old = privacy_config.normalized_setting(old, new)
  if not any(privacy_config.new_name(k) for k in old):
    return old
  out = dict(old)
  for name in list(out):
    target = privacy_config.new_name(name)
    if target is None or name in new or target not in new:
      continue
    value = out.pop(name)
    if name == "exact_noise":
      value = "exact" if value else "float"
    out[target] = value
  for key, value in LEGACY_DEFAULTS.items():
    if key in new:
      out.setdefault(key, value)
  return privacy_config.normalized_setting(out, new)


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
    if recorded["fingerprint"] == digest:
      return
    recorded_config = with_added(recorded["config"], flat)
    if fingerprint(_nested(recorded_config))[0] == digest:
      return  # a run of an earlier release, before fields were added
    old = normalized(recorded_config, flat)
    renamed = old is not recorded_config
    same = renamed and fingerprint(_nested(old))[0] == digest
    if not same and resume != "force":
      keys = sorted(set(old) | set(flat))
      diffs = [
        f"  {k}: {old.get(k, '<unset>')!r} -> {flat.get(k, '<unset>')!r}"
        for k in keys
        if old.get(k) != flat.get(k)
      ]
      earlier = (
        " (its config, from an earlier release, read in the privacy "
        "block's names: set the fields below to carry it over)"
        if renamed
        else ""
      )
      raise ConfigMismatchError(
        f"{workdir} holds a run of a different configuration{earlier}; "
        "resuming it would mix two runs (and their privacy ledgers). "
        "Differences:\n"
        + "\n".join(diffs)
        + "\nUse a new workdir, or --resume=force to "
        "resume anyway."
      )
  if not write:
    return
  os.makedirs(workdir, exist_ok=True)
  tmp = path + ".tmp"  # replaced whole: a kill leaves no half-written record
  with open(tmp, "w") as f:
    json.dump(
      {"fingerprint": digest, "config": flat}, f, indent=2, sort_keys=True
    )
  os.replace(tmp, path)


def _nested(flat: dict) -> dict:
  """The flat ``{"a.b": v}`` config as nested dicts (as ``to_dict``)."""
  out: dict = {}
  for key, value in flat.items():
    *blocks, leaf = key.split(".")
    node = out
    for block in blocks:
      node = node.setdefault(block, {})
    node[leaf] = value
  return out
