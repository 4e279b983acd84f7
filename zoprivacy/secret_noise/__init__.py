"""Secret noise: exact samplers and how a jitted step gets their draws.

Everything here draws from a run's secret (OS entropy, see
:mod:`zoprivacy.privacy.randomness`); what is drawn is accounted by the
run's :class:`~zoprivacy.privacy.plan.PrivacyPlan`.

* :mod:`~zoprivacy.secret_noise.discrete_noise`: exact discrete Gaussian and
  Laplace samplers (scalars and small vectors);
* :mod:`~zoprivacy.secret_noise.exact_noise`: :class:`ExactNoiseSource`, the
  host-side draw of each step's exact noise (prefetched off the step's
  timing path);
* :mod:`~zoprivacy.secret_noise.host_noise`: the host callback (a
  ``buffer_callback`` on the CPU, ``jax.pure_callback`` elsewhere) through
  which a jitted update draws that noise by itself;
* :mod:`~zoprivacy.secret_noise.noise_binding`: :func:`bind_noise_secret`,
  the same noise keys on every process of a run;
* :mod:`~zoprivacy.secret_noise.vector_discrete_noise`,
  :mod:`~zoprivacy.secret_noise.vector_noise_prefetch`: the d-dimensional
  exact sampler and its background prefetch;
* :mod:`~zoprivacy.secret_noise.session_lookup`: a default state's session
  key looked up, with its exact scalar noise, when the jitted step runs;
* :mod:`~zoprivacy.secret_noise.predraw`: the first step's noise (after a
  start, a resume or new keys) drawn before that step runs;
* :mod:`~zoprivacy.secret_noise.vector_discrete_mechanism`: the exact vector
  mechanism (an integer lattice of proven L2 sensitivity) that draws its
  noise from the samplers above.

Submodules and names are imported on first use (PEP 562).
"""

from zoprivacy.core.lazy import lazy_package

__getattr__, __dir__, __all__ = lazy_package(
  __name__,
  (
    "discrete_noise",
    "exact_noise",
    "host_callback",
    "host_noise",
    "noise_binding",
    "predraw",
    "session_lookup",
    "vector_discrete_noise",
    "vector_noise_prefetch",
    "vector_discrete_mechanism",
  ),
  {
    "ExactNoiseSource": "zoprivacy.secret_noise.exact_noise",
    "bind_noise_secret": "zoprivacy.secret_noise.noise_binding",
    "refresh_noise_keys": "zoprivacy.secret_noise.noise_binding",
  },
)
