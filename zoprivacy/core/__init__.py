"""The foundation layer: what every other part of zoprivacy builds on.

* :mod:`~zoprivacy.core.validation`: argument checks and the neighbouring
  relations;
* :mod:`~zoprivacy.core.linalg`: small linear-algebra helpers;
* :mod:`~zoprivacy.core.masked_sums`: sums over the real (unpadded) examples;
* :mod:`~zoprivacy.core.sharding`: data and parameter sharding over devices;
* :mod:`~zoprivacy.core.nnx_support`: Flax NNX models as pure loss functions;
* :mod:`~zoprivacy.core.estimator_manifest`: the estimators' registry
  declarations, read before JAX loads (it imports no JAX, so a command line
  can check its arguments first).

Submodules are imported on first access; importing this package loads no
JAX.
"""

import importlib

_SUBMODULES = (
  "validation",
  "linalg",
  "masked_sums",
  "sharding",
  "nnx_support",
  "estimator_manifest",
)
__all__ = list(_SUBMODULES)


def __getattr__(name: str):
  """Each submodule, imported on first access (PEP 562)."""
  if name not in _SUBMODULES:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  return importlib.import_module(f"{__name__}.{name}")


def __dir__():
  return __all__
