"""Privacy plumbing: secret randomness, exact noise, the privacy plan.

* :mod:`~zoprivacy.privacy.randomness`: public direction keys vs secret
  noise and sampling keys (OS entropy), and the insecure test option;
* :mod:`~zoprivacy.privacy.plan`: :class:`PrivacyPlan`, the one description
  of a run's privacy that calibration, the ledger and every report read;
* :mod:`~zoprivacy.privacy.discrete_noise`: exact discrete Gaussian and
  Laplace samplers;
* :mod:`~zoprivacy.privacy.exact_noise`: :class:`ExactNoiseSource`, the
  host-side draw of each step's exact noise (prefetched off the step's
  timing path);
* :mod:`~zoprivacy.privacy.host_noise`: the host callback (a ``buffer_callback`` on the CPU,
  ``jax.pure_callback`` elsewhere) through which
  a jitted update draws that noise by itself;
* :mod:`~zoprivacy.privacy.noise_binding`: :func:`bind_noise_secret`, the
  same noise keys on every process of a run.
"""

from zoprivacy.privacy.exact_noise import ExactNoiseSource
from zoprivacy.privacy.noise_binding import bind_noise_secret
from zoprivacy.privacy.plan import PlanError, PrivacyPlan, find_plan
from zoprivacy.privacy.randomness import InsecureTestNoiseWarning

__all__ = [
  "ExactNoiseSource",
  "InsecureTestNoiseWarning",
  "PlanError",
  "PrivacyPlan",
  "bind_noise_secret",
  "find_plan",
]
