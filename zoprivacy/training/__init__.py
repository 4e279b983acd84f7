"""Training glue on top of the estimators.

* :mod:`~zoprivacy.training.training_step`: :func:`make_step`, one jitted
  update of an ``optax`` chain;
* :mod:`~zoprivacy.training.layerwise`: layer-by-layer zeroth-order updates;
* :mod:`~zoprivacy.training.trajectory`: the replayable log of a
  zeroth-order run.

Submodules are imported on first access.
"""

import importlib

_SUBMODULES = ("training_step", "layerwise", "trajectory")
__all__ = list(_SUBMODULES)


def __getattr__(name: str):
  """Each submodule, imported on first access (PEP 562)."""
  if name not in _SUBMODULES:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  return importlib.import_module(f"{__name__}.{name}")


def __dir__():
  return __all__
