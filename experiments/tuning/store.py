"""The tuning's secret material: its secret, its trials and their scores.

Everything under ``<workdir>/secret/`` (mode 0700; files 0600) is secret:
the 256-bit tuning secret (from which the number of trials ``K``, every
trial's hyperparameters and every score's noise follow), the state file
(one entry per finished trial) and the trials' own workdirs (their
checkpoints hold their noise secrets; their count is ``K``). Never publish
it. The released files are the others in ``<workdir>``: ``result.json``,
``model.msgpack`` and ``config.json``; none of them depends on ``K``
except through the selected trial.
"""

from __future__ import annotations

import json
import os

from zoprivacy.privacy import randomness

SECRET_DIR = "secret"


def secret_dir(workdir: str) -> str:
  path = os.path.join(workdir, SECRET_DIR)
  os.makedirs(path, mode=0o700, exist_ok=True)
  os.chmod(path, 0o700)
  return path


def _write_private(path: str, data: bytes) -> None:
  tmp = path + ".tmp"
  fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
  with os.fdopen(fd, "wb") as f:
    f.write(data)
  os.chmod(tmp, 0o600)
  os.replace(tmp, path)


def load_or_create_secret(workdir: str, insecure_seed: int | None) -> bytes:
  """The tuning's secret: read back on resume, else drawn from OS entropy
  (or, for tests, the insecure secret of ``insecure_seed``)."""
  path = os.path.join(secret_dir(workdir), "tuning_secret")
  if os.path.exists(path):
    with open(path, "rb") as f:
      return randomness.check_secret(f.read())
  secret = (
    randomness.new_secret()
    if insecure_seed is None
    else randomness.insecure_test_secret(insecure_seed)
  )
  _write_private(path, secret)
  return secret


def trial_workdir(workdir: str, trial: int) -> str:
  return os.path.join(secret_dir(workdir), "trials", f"{trial:04d}")


def load_state(workdir: str) -> dict:
  path = os.path.join(secret_dir(workdir), "state.json")
  if not os.path.exists(path):
    return {"trials": {}}
  with open(path) as f:
    return json.load(f)


def save_state(workdir: str, state: dict) -> None:
  path = os.path.join(secret_dir(workdir), "state.json")
  _write_private(path, json.dumps(state, indent=1, sort_keys=True).encode())
