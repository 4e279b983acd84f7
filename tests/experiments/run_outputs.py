"""What a finished run leaves in its workdir, for resume tests to compare.

Shared by the per-estimator stop-and-resume test and the SIGKILL test: an
interrupted and resumed run must leave the same parameters, the same ledger
and the same metrics rows as an uninterrupted one, bit for bit (wall-clock
seconds aside).
"""

import json
import os
from typing import NamedTuple


class RunOutputs(NamedTuple):
  params_sha256: str
  ledger: str | None  # privacy_ledger.json as written; None if non-private
  metrics: list  # metrics.jsonl rows without their "seconds"


def metrics_rows(workdir) -> list:
  path = os.path.join(workdir, "metrics.jsonl")
  if not os.path.exists(path):
    return []
  with open(path) as f:
    rows = [json.loads(line) for line in f if line.strip()]
  for r in rows:
    r.pop("seconds", None)
  return rows


def run_outputs(workdir) -> RunOutputs:
  with open(os.path.join(workdir, "result.json")) as f:
    result = json.load(f)
  ledger_path = os.path.join(workdir, "privacy_ledger.json")
  ledger = None
  if os.path.exists(ledger_path):
    with open(ledger_path) as f:
      ledger = f.read()
  return RunOutputs(result["params_sha256"], ledger, metrics_rows(workdir))
