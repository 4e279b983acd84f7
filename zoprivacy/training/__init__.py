"""Training glue on top of the estimators.

* :mod:`~zoprivacy.training.training_step`: :func:`make_step`, one jitted
  update of an ``optax`` chain;
* :mod:`~zoprivacy.training.layerwise`: layer-by-layer zeroth-order updates;
* :mod:`~zoprivacy.training.trajectory`: the replayable log of a
  zeroth-order run (its logger; the format is
  :mod:`~zoprivacy.training.trajectory_format`);
* :mod:`~zoprivacy.training.replay`: its replay.

Submodules are imported on first access.
"""

from zoprivacy.core.lazy import lazy_package

__getattr__, __dir__, __all__ = lazy_package(
  __name__,
  ("training_step", "layerwise", "trajectory", "trajectory_format", "replay"),
)
