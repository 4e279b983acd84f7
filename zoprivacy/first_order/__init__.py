"""First-order primitives: per-example gradients and their contract.

* :mod:`~zoprivacy.first_order.layer_capture`: the layers' inputs and output
  gradients, captured in one backward pass, inside the stacks of layers
  that models run through :mod:`~zoprivacy.first_order.layer_stack` too;
* :mod:`~zoprivacy.first_order.ghost_clipping`: per-example gradient norms
  without per-example gradients (ghost clipping), layer by layer in
  :mod:`~zoprivacy.first_order.ghost_groups`, and
  :mod:`~zoprivacy.first_order.ghost_fallback`: the warning when it falls
  back to per-example gradients for some parameters;
* :mod:`~zoprivacy.first_order.per_example_check`,
  :mod:`~zoprivacy.first_order.per_example_report`: the check that a loss is
  truly per example (no cross-example dependence) and its report.

Submodules are imported on first access.
"""

from zoprivacy.core.lazy import lazy_package

__getattr__, __dir__, __all__ = lazy_package(
  __name__,
  (
    "layer_capture",
    "layer_stack",
    "ghost_clipping",
    "ghost_groups",
    "ghost_fallback",
    "per_example_check",
    "per_example_report",
  ),
)
