"""Privacy accounting for zoprivacy.

Conventions (``docs/conventions.md``, ``docs/accounting.md``):

* ``noise_multiplier`` = noise std (Gaussian) or Laplace scale over ``C``,
  one example's contribution bound; add/remove-one is the default relation,
  replace-one (sensitivity ``2C``) must be asked for.
* PLD epsilons are dp_accounting's *pessimistic* estimate and the maximum of
  the add and remove directions (DP-ZO App. A, Remark A.9).
* All composition is done by dp_accounting (PLD and RDP accountants).
"""

import importlib

# Imported on first use (PEP 562): ``import zoprivacy.accounting`` stays cheap
# and never imports JAX; dp_accounting loads with the first function called.
_EXPORTS = {
  "CalibrationResult": "zoprivacy.accounting.calibration",
  "DirectionalEpsilon": "zoprivacy.accounting.epsilon",
  "EpsilonReport": "zoprivacy.accounting.report",
  "epsilon_report": "zoprivacy.accounting.report",
  # The ledger composes plans, so it lives beside them in zoprivacy.privacy;
  # these three names stay here as aliases for existing callers.
  "CorruptLedgerError": "zoprivacy.privacy.ledger",
  "PrivacyBudgetExceededError": "zoprivacy.privacy.ledger",
  "PrivacyLedger": "zoprivacy.privacy.ledger",
  "build_pld": "zoprivacy.accounting.epsilon",
  # A mechanism named by a string is calibrated through the plan it names
  # (zoprivacy.privacy builds plans); the name stays here for its callers.
  "calibrate_noise_multiplier": "zoprivacy.privacy.calibration",
  "calibrate_plan": "zoprivacy.accounting.plan_calibration",
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
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
  if name not in _EXPORTS:
    raise AttributeError(
      f"module 'zoprivacy.accounting' has no attribute {name!r}"
    )
  value = getattr(importlib.import_module(_EXPORTS[name]), name)
  globals()[name] = value
  return value


def __dir__():
  return __all__
