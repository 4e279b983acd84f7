"""An optional on-disk cache of noise-multiplier searches.

Calibrating a run's noise (:func:`~zoprivacy.accounting.calibrate_plan`)
starts from a PLD search over the noise multiplier that takes seconds, and
repeated runs of one configuration repeat it exactly: it is a deterministic
function of public numbers (target epsilon, delta, sampling probability,
steps, mechanism, neighbouring relation, tolerance). With the environment
variable ``ZOPRIVACY_CALIBRATION_CACHE_DIR`` set to a directory, the search's
result is stored there under the SHA-256 of those inputs (plus the
dp_accounting version and this format's version) and read back by later
runs. Unset (the default), nothing is read or written.

The cached value is only the search's *starting point*: ``calibrate_plan``
always recomputes the plan's own epsilon at it and raises the multiplier
until the target is met, so a stale, foreign or edited entry can cost
utility (too much noise) but can never make a run report, or spend, more
epsilon than its target. No private data enters the key or the value.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable
from importlib import metadata

ENV_VAR = "ZOPRIVACY_CALIBRATION_CACHE_DIR"
FORMAT_VERSION = 1


def _key(name: str, inputs: dict) -> str:
  return json.dumps(
    {
      "format": FORMAT_VERSION,
      "dp_accounting": metadata.version("dp-accounting"),
      "search": name,
      **inputs,
    },
    sort_keys=True,
  )


def _read(path: str, key: str) -> float | None:
  try:
    with open(path) as f:
      record = json.load(f)
    value = float(record["noise_multiplier"])
  except (OSError, ValueError, TypeError, KeyError):
    return None
  if record.get("key") != key or not (math.isfinite(value) and value > 0):
    return None
  return value


def cached_noise_multiplier(
  name: str, inputs: dict, search: Callable[[], float]
) -> float:
  """``search()``, or its stored result for the same ``name`` and
  ``inputs`` (JSON-serialisable public numbers) when the cache is on."""
  directory = os.environ.get(ENV_VAR)
  if not directory:
    return search()
  key = _key(name, inputs)
  path = os.path.join(
    directory, hashlib.sha256(key.encode()).hexdigest() + ".json"
  )
  value = _read(path, key)
  if value is not None:
    return value
  value = float(search())
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
  with os.fdopen(fd, "w") as f:
    json.dump({"key": key, "noise_multiplier": value}, f)
  os.replace(tmp, path)  # atomic: concurrent runs never read half a file
  return value
