"""Zeroth-order primitives: random directions and loss queries.

* :mod:`~zoprivacy.zo.directions`: the random directions ``u`` (Gaussian,
  sphere, Rademacher, coordinate, Stiefel) drawn from a public key;
* :mod:`~zoprivacy.zo.counter_hash`, :mod:`~zoprivacy.zo.counter_directions`:
  counter-based directions, generated leaf by leaf without materializing the
  whole vector;
* :mod:`~zoprivacy.zo.queries`: per-example losses at perturbed parameters;
* :mod:`~zoprivacy.zo.blockwise_dot`: the blockwise dot products the queries
  use;
* :mod:`~zoprivacy.zo.projection`: projections onto a parameter set.

Submodules are imported on first access.
"""

import importlib

_SUBMODULES = (
  "directions",
  "counter_hash",
  "counter_directions",
  "queries",
  "blockwise_dot",
  "projection",
)
__all__ = list(_SUBMODULES)


def __getattr__(name: str):
  """Each submodule, imported on first access (PEP 562)."""
  if name not in _SUBMODULES:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  return importlib.import_module(f"{__name__}.{name}")


def __dir__():
  return __all__
