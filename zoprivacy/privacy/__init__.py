"""Privacy bookkeeping: secret randomness, the privacy plan, the ledger.

* :mod:`~zoprivacy.privacy.randomness`: public direction keys vs secret
  noise and sampling keys (OS entropy), and the insecure test option;
* :mod:`~zoprivacy.privacy.sampling_scheme`: how a step's batch is drawn,
  as a value the accountant reads;
* :mod:`~zoprivacy.privacy.plan`: :class:`PrivacyPlan`, the one description
  of a run's privacy that calibration, the ledger and every report read;
* :mod:`~zoprivacy.privacy.calibration`: THE calibration of a privacy
  value or plan for a target (:func:`calibrate`), and the noise search for
  a mechanism named by a string (:func:`calibrate_noise_multiplier`);
* :mod:`~zoprivacy.privacy.report`: a plan's epsilons side by side
  (:func:`epsilon_report`, the accounting command line's);
* :mod:`~zoprivacy.privacy.state`: the plan an optimizer state holds
  (:func:`find_plan`) and the epsilon of the releases it counted
  (:func:`epsilon`), refusing the optax wrappers that drop releases and
  the members that read the loss themselves
  (:mod:`~zoprivacy.privacy.wrappers`);
* :mod:`~zoprivacy.privacy.ledger`: the write-ahead record of every release;
* :mod:`~zoprivacy.privacy.noise_sessions`: the default noise keys, whose
  secrets never leave the process: no restored or copied state replays
  its noise;
* :mod:`~zoprivacy.privacy.noise_keys`: the estimators' noise keys in an
  optax state, bound to a shared secret or refreshed
  (:func:`refresh_noise_keys`) so that no step reuses noise over other
  inputs.

The samplers that draw the secret noise are :mod:`zoprivacy.secret_noise`.
"""

from zoprivacy.core.lazy import lazy_package

# Imported on first use: ``import zoprivacy.privacy.plan`` (the accounting
# command line) loads neither JAX nor the noise samplers.
__getattr__, __dir__, __all__ = lazy_package(
  __name__,
  (),
  {
    "CalibrationResult": "zoprivacy.privacy.calibration",
    "CorruptLedgerError": "zoprivacy.privacy.ledger",
    "EpsilonReport": "zoprivacy.privacy.report",
    "InsecureTestNoiseWarning": "zoprivacy.privacy.randomness",
    "LossReadingError": "zoprivacy.privacy.wrappers",
    "PlanError": "zoprivacy.privacy.plan",
    "PrivacyBudgetExceededError": "zoprivacy.privacy.ledger",
    "PrivacyLedger": "zoprivacy.privacy.ledger",
    "PrivacyPlan": "zoprivacy.privacy.plan",
    "RecomputedStepWarning": "zoprivacy.privacy.noise_sessions",
    "SkippingWrapperError": "zoprivacy.privacy.wrappers",
    "calibrate": "zoprivacy.privacy.calibration",
    "calibrate_noise_multiplier": "zoprivacy.privacy.calibration",
    "epsilon_report": "zoprivacy.privacy.report",
    "epsilon": "zoprivacy.privacy.state",
    "find_plan": "zoprivacy.privacy.state",
    "refresh_noise_keys": "zoprivacy.privacy.noise_keys",
  },
)
