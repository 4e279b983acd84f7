"""The foundation layer: what every other part of zoprivacy builds on.

* :mod:`~zoprivacy.core.validation`: argument checks and the neighbouring
  relations;
* :mod:`~zoprivacy.core.linalg`: small linear-algebra helpers;
* :mod:`~zoprivacy.core.masked_sums`: sums over the real (unpadded) examples;
* :mod:`~zoprivacy.core.sharding`: data and parameter sharding over devices;
* :mod:`~zoprivacy.core.nnx_support`: Flax NNX models as pure loss functions.

It knows nothing of the layers above (the estimators' JAX-free declarations
are :mod:`zoprivacy.estimator_manifest`, beside their package).

Submodules are imported on first access; importing this package loads no
JAX.
"""

from zoprivacy.core.lazy import lazy_package

__getattr__, __dir__, __all__ = lazy_package(
  __name__,
  (
    "validation",
    "linalg",
    "masked_sums",
    "sharding",
    "nnx_support",
    "lazy",
  ),
)
