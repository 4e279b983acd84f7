"""Privacy accounting for zoprivacy.

Conventions (``docs/conventions.md``, ``docs/accounting.md``):

* ``noise_multiplier`` = noise std (Gaussian) or Laplace scale over ``C``,
  one example's contribution bound; add/remove-one is the default relation,
  replace-one (sensitivity ``2C``) must be asked for.
* PLD epsilons are dp_accounting's *pessimistic* estimate and the maximum of
  the add and remove directions (DP-ZO App. A, Remark A.9).
* All composition is done by dp_accounting (PLD and RDP accountants).

What reads a privacy plan lives a layer above, in :mod:`zoprivacy.privacy`:
the calibration (``zoprivacy.privacy.calibrate``), the ledger and the
epsilon report. This package imports nothing from there.
"""

import importlib

# Imported on first use (PEP 562): ``import zoprivacy.accounting`` stays cheap
# and never imports JAX; dp_accounting loads with the first function called.
_EXPORTS = {
  "DirectionalEpsilon": "zoprivacy.accounting.epsilon",
  "build_pld": "zoprivacy.accounting.epsilon",
  "dpzero_advanced_composition_noise_multiplier": "zoprivacy.accounting.epsilon",
  "dpzero_advanced_composition_sigma": "zoprivacy.accounting.epsilon",
  "neighboring_relation": "zoprivacy.accounting.events",
  "pld_epsilon": "zoprivacy.accounting.epsilon",
  "pld_epsilon_by_direction": "zoprivacy.accounting.epsilon",
  "pld_epsilon_for_delta": "zoprivacy.accounting.epsilon",
  "poisson_gaussian_event": "zoprivacy.accounting.events",
  "poisson_laplace_event": "zoprivacy.accounting.events",
  "pure_epsilon_poisson_laplace": "zoprivacy.accounting.epsilon",
  "pure_laplace_noise_multiplier": "zoprivacy.accounting.epsilon",
  "rdp_epsilon": "zoprivacy.accounting.rdp",
  "rdp_epsilon_and_order": "zoprivacy.accounting.rdp",
}
# Names of earlier releases that read plans, which live a layer above
# (zoprivacy.privacy): where each one is now.
_MOVED = {
  "calibrate_plan": "the plan's calibration is zoprivacy.privacy.calibrate("
  "plan, zoprivacy.Target(epsilon=, delta=, num_steps=))",
  "calibrate_noise_multiplier": "it is zoprivacy.privacy."
  "calibrate_noise_multiplier",
  "CalibrationResult": "it is zoprivacy.privacy.CalibrationResult",
  "epsilon_report": "it is zoprivacy.privacy.epsilon_report",
  "EpsilonReport": "it is zoprivacy.privacy.EpsilonReport",
  "PrivacyLedger": "it is zoprivacy.privacy.PrivacyLedger",
  "PrivacyBudgetExceededError": "it is zoprivacy.privacy."
  "PrivacyBudgetExceededError",
  "CorruptLedgerError": "it is zoprivacy.privacy.CorruptLedgerError",
}
__all__ = sorted(_EXPORTS)


class MovedNameError(ImportError):
  """A name of earlier releases that moved. An ImportError, not an
  AttributeError: ``from zoprivacy.accounting import calibrate_plan`` would
  turn an AttributeError into Python's generic "cannot import name"."""


def __getattr__(name: str):
  if name in _MOVED:
    raise MovedNameError(
      f"zoprivacy.accounting.{name} has moved: {_MOVED[name]}."
    )
  if name not in _EXPORTS:
    raise AttributeError(
      f"module 'zoprivacy.accounting' has no attribute {name!r}"
    )
  value = getattr(importlib.import_module(_EXPORTS[name]), name)
  globals()[name] = value
  return value


def __dir__():
  return __all__
