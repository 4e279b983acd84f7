"""What a tuning ran and released, read from its records, not its flags.

A tuning workdir belongs to one tuning: its secret fixes the trial count
``K``, the points and the trials for the settings it was started with, and
one repeat-and-select accounting (Papernot and Steinke 2022) covers the
trials of one tuning, selected once. So:

* :func:`claim` refuses another tuning's settings in the workdir, with
  ``--resume=force`` too (one paragraph). Accounting a takeover as a
  second release would compose two repeat-and-select events whose trials
  overlap (the old trials would be selected again, among new ones of
  another noise); a new workdir gives the same two releases cleanly, each
  accounted, and costs nothing the takeover would save but the old
  trials' compute. The settings' fingerprint is also kept in the secret
  state, so a lost ``config.json`` hands the trials to no other tuning.
* :func:`recorded_steps` reads every trial workdir on disk, finished or
  not: each trial's ledger must hold the tuning's plan only, and the total
  epsilon counts the most steps any trial recorded (a trial killed and
  resumed computes some steps twice, and its ledger charges both).
* :func:`record_release` writes the selection to the secret state before
  it is released; a later release of another selection from the same
  workdir is refused (the total counts one).
"""

from __future__ import annotations

import os

from experiments.run import workdir as workdir_lib
from experiments.tuning import budget, store
from zoprivacy.privacy.ledger import PrivacyLedger


class TuningMismatchError(ValueError):
  """The workdir holds the trials of a tuning with other settings."""


def _mismatch(workdir: str, diffs: list[str]) -> TuningMismatchError:
  return TuningMismatchError(
    f"{workdir} holds a tuning with other settings ("
    + "; ".join(diffs)
    + "). A tuning cannot be taken over, with --resume=force either: its "
    "secret fixes the trial count, the points and the trials of the "
    "settings it was started with, and one repeat-and-select accounting "
    "covers one tuning's trials, selected once; mixing in trials of other "
    "settings would release a selection that no accounting covers. Use a "
    "new workdir for the new settings: the two tunings are then two "
    "releases on the same data, and their total epsilons add up."
  )


def claim(workdir: str, tuning_config: dict, state: dict) -> None:
  """Claims ``workdir`` for the tuning ``tuning_config`` (config, search,
  trial count, score noise, ...) and binds its secret ``state`` to it.
  Another tuning's settings are refused, whatever ``--resume`` says, and
  before anything is written (a state of another tuning whose
  ``config.json`` was lost included)."""
  try:
    workdir_lib.claim(workdir, tuning_config, "", write=False)
  except workdir_lib.ConfigMismatchError as e:
    lines = str(e).splitlines()  # the differences are indented
    raise _mismatch(
      workdir, [x.strip() for x in lines if x.startswith("  ")]
    ) from None
  digest = workdir_lib.fingerprint(tuning_config)[0]
  if state.get("fingerprint", digest) != digest:
    raise _mismatch(
      workdir, ["its secret state was written for another fingerprint"]
    )
  workdir_lib.claim(workdir, tuning_config, "")  # writes config.json
  if "fingerprint" not in state:
    state["fingerprint"] = digest
    store.save_state(workdir, state)


def _trial_ledgers(workdir: str):
  folder = os.path.dirname(store.trial_workdir(workdir, 0))
  if not os.path.isdir(folder):
    return
  for name in sorted(os.listdir(folder)):
    path = os.path.join(folder, name, "privacy_ledger.json")
    if os.path.exists(path):
      yield int(name), PrivacyLedger.load(path)


def recorded_steps(workdir: str, plan, num_steps: int) -> int:
  """The most steps any trial's ledger records (at least ``num_steps``);
  refuses a trial whose ledger holds another plan."""
  most = num_steps
  for trial, ledger in _trial_ledgers(workdir):
    for held, _ in ledger.segments:
      if not budget.same_event(held.replace(delta=plan.delta), plan):
        raise _mismatch(
          workdir,
          [
            f"trial {trial}'s ledger holds steps of another plan "
            f"[{held.describe()}], not the tuning's [{plan.describe()}]"
          ],
        )
    most = max(most, ledger.num_steps)
  return most


def total(plan, steps: int, score_noise: float, count, target) -> dict:
  """``total_epsilon`` and ``delta`` of every trial as recorded (``steps``
  each, :func:`recorded_steps`), selected once; a warning when replayed
  steps take it over ``target``."""
  event = budget.trial_event(budget.step_rdp_event(plan), steps, score_noise)
  eps = budget.total_epsilon(
    event, count, delta=plan.delta, neighboring=plan.neighboring
  )
  out = {"total_epsilon": eps, "delta": plan.delta}
  if target is not None and eps > target * (1 + 1e-6):
    out["warning"] = (
      f"total epsilon {eps:.4f} exceeds the target {target:g}: replayed "
      "steps are charged"
    )
  return out


def record_release(workdir: str, state: dict, selection: dict) -> None:
  """Records ``selection`` (trial, noisy score, model digest) in the
  secret state before it is released; refuses another one."""
  held = state.get("released")
  if held is not None and held != selection:
    raise TuningMismatchError(
      f"{workdir} already released trial {held['trial']} (noisy score "
      f"{held['score']}); releasing trial {selection['trial']} now would be "
      "a second selection, which the total epsilon does not count. Its "
      "trials changed since (a trial's files were lost or replaced); use a "
      "new workdir."
    )
  state["released"] = selection
  store.save_state(workdir, state)
