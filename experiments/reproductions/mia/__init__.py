"""``mia``: membership inference on inserted canaries (DP-ZO Table 6 analog).

DP-ZO (Tang et al. 2024) Table 6 reports membership-inference AUC of
private and non-private fine-tuning. The paper's models and data are not on
this machine; this analog keeps the protocol on scikit-learn's digits and
the small CNN of ``configs/default.py``:

* 500 out-of-distribution canaries (uniform-noise images, random labels),
  each inserted with probability 1/2 (:mod:`.canaries`);
* DPZero at epsilon in {0.5, 1, 2, 4, 10}, delta = 1e-5, calibrated noise,
  the hyperparameters of ``configs/default.py`` for every epsilon; MeZO
  (``configs/mezo.py``) and first-order SGD as non-private baselines
  (:mod:`.run`, :mod:`.first_order`);
* the loss-threshold attack and offline LiRA with 4 reference models per
  setting (:mod:`.attacks`); AUC and TPR at 1% FPR with bootstrap intervals
  (:mod:`.roc`); the one-run epsilon lower bound of Steinke et al. (2023);
* ``summary.md`` / ``table.md``, ``roc.png``, ``results.json`` and the
  per-canary statistics of every model (``runs.json``, which also lets an
  interrupted command resume) (:mod:`.report`).

    python -m experiments.reproductions.mia --out DIR [--fast]
    python -m experiments.reproduce mia [--fast]
"""

from __future__ import annotations

import os
import time

import numpy as np

from experiments.reproductions.mia import attacks, canaries, report, roc, run
from experiments.reproductions.pazo_table1 import compilation_cache
from zoprivacy.audit import one_run

TARGET_FPR = 0.01
AUDIT_GUESS_FRACTION = 0.1  # fixed before the scores are seen


def analyze(setting, records, canary_set, mode) -> report.Row:
  """Both attacks' scores and metrics for one setting's runs."""
  target = attacks.CanaryStatistics.from_dict(records["target"]["stats"])
  refs = [
    attacks.CanaryStatistics.from_dict(r["stats"])
    for r in records["references"]
  ]
  loss_scores = attacks.loss_attack_scores(target)
  lira_scores = attacks.lira_offline_scores(target, refs)
  kwargs = dict(target_fpr=TARGET_FPR, num_bootstrap=mode.num_bootstrap)
  k = max(1, int(AUDIT_GUESS_FRACTION * len(canary_set)))
  audit = one_run.one_run_audit(
    lira_scores,
    canary_set.is_member,
    num_positive=k,
    num_negative=k,
    delta=run.DELTA,
  )
  t = records["target"]
  return report.Row(
    label=setting.label,
    private=setting.private,
    epsilon=float(t["epsilon"]),
    noise_multiplier=t["noise_multiplier"],
    accuracy=float(t["accuracy"]),
    loss_attack=roc.evaluate(loss_scores, canary_set.is_member, **kwargs),
    lira=roc.evaluate(lira_scores, canary_set.is_member, **kwargs),
    one_run_epsilon=audit.epsilon_lower_bound,
    loss_scores=loss_scores,
    lira_scores=lira_scores,
  )


def main(out: str, *, fast: bool = False) -> dict:
  """Runs (or resumes) the experiment; writes the report to ``out``."""
  mode = run.MODES["fast" if fast else "full"]
  os.makedirs(out, exist_ok=True)
  start = time.time()
  base, canary_set, test = canaries.experiment_data(
    mode.num_canaries, mode.canary_kind, run.CANARY_SEED
  )
  print(
    f"MIA ({mode.name}): {len(base)} base training images, "
    f"{len(canary_set)} {mode.canary_kind} canaries "
    f"({canary_set.num_members} members), {len(test)} test images; "
    "evaluation runs",
    flush=True,
  )
  compilation_cache(os.path.join(out, "jax_cache"))
  runner = run.Runner(out, mode)
  rows = []
  for setting in run.settings(mode):
    records = run.run_setting(runner, setting)
    rows.append(analyze(setting, records, canary_set, mode))
  info = report.Info(
    mode=mode.name,
    smoke=mode.smoke,
    setup=(
      f"Digits: {len(base)} base training images + the member canaries, "
      f"{len(test)} test images; SmallCNN features {mode.features}; "
      f"{mode.num_steps} steps, expected batch 64 (Poisson) for DPZero "
      "(lr 0.02, clip 1, smoothing 1e-3, Gaussian directions: "
      "configs/default.py) and MeZO (lr 0.001: configs/mezo.py); SGD: "
      f"lr {run.SGD_LEARNING_RATE:g}, batch 64, same number of steps."
    ),
    num_canaries=len(canary_set),
    num_members=canary_set.num_members,
    num_references=mode.num_references,
    delta=run.DELTA,
    seconds=time.time() - start,
    command="python -m experiments.reproductions.mia"
    + (" --fast" if fast else ""),
    noise=(
      "the INSECURE test seed: reproducible, not private"
      if mode.smoke
      else "OS entropy"
    ),
  )
  text = report.write(out, info, rows, canary_set.is_member)
  print(text, flush=True)
  return {
    "rows": [r.to_dict() for r in rows],
    "is_member": np.asarray(canary_set.is_member),
    "smoke": mode.smoke,
  }
