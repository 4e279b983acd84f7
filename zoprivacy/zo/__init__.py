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

from zoprivacy.core.lazy import lazy_package

__getattr__, __dir__, __all__ = lazy_package(
  __name__,
  (
    "directions",
    "counter_hash",
    "counter_directions",
    "queries",
    "blockwise_dot",
    "projection",
  ),
)
