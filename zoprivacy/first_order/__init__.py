"""First-order primitives: per-example gradients and their contract.

* :mod:`~zoprivacy.first_order.layer_capture`: the layers' inputs and output
  gradients, captured in one backward pass;
* :mod:`~zoprivacy.first_order.ghost_clipping`: per-example gradient norms
  without per-example gradients (ghost clipping);
* :mod:`~zoprivacy.first_order.per_example_check`,
  :mod:`~zoprivacy.first_order.per_example_report`: the check that a loss is
  truly per example (no cross-example dependence) and its report.

Submodules are imported on first access.
"""

import importlib

_SUBMODULES = (
  "layer_capture",
  "ghost_clipping",
  "per_example_check",
  "per_example_report",
)
__all__ = list(_SUBMODULES)


def __getattr__(name: str):
  """Each submodule, imported on first access (PEP 562)."""
  if name not in _SUBMODULES:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  return importlib.import_module(f"{__name__}.{name}")


def __dir__():
  return __all__
