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
  same noise keys on every process of a run;
* :mod:`~zoprivacy.privacy.vector_discrete_mechanism`: the exact vector
  mechanism (an integer lattice of proven L2 sensitivity) that draws its
  noise from the samplers above.
"""

import importlib

# Imported on first use (PEP 562): ``import zoprivacy.privacy.plan`` (the
# accounting command line) loads neither JAX nor the noise samplers.
_EXPORTS = {
  "ExactNoiseSource": "zoprivacy.privacy.exact_noise",
  "InsecureTestNoiseWarning": "zoprivacy.privacy.randomness",
  "PlanError": "zoprivacy.privacy.plan",
  "PrivacyPlan": "zoprivacy.privacy.plan",
  "bind_noise_secret": "zoprivacy.privacy.noise_binding",
  "find_plan": "zoprivacy.privacy.plan",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
  if name not in _EXPORTS:
    raise AttributeError(
      f"module 'zoprivacy.privacy' has no attribute {name!r}"
    )
  value = getattr(importlib.import_module(_EXPORTS[name]), name)
  globals()[name] = value
  return value


def __dir__():
  return __all__
