"""THE resolution of a run: its config, completed, checked and typed once.

:func:`resolve` is the one road from a config to the run's typed
:class:`~experiments.run.settings.Settings`: the config completed with
``configs/default.py``'s fields
(:func:`experiments.run.config_defaults.complete`), the processes joined
when ``config.distributed`` asks (before JAX computes anything), every
check that needs no data (:func:`experiments.run.preflight.validate`,
which also gives the estimator's registry declaration), then
:meth:`Settings.from_config <experiments.run.settings.Settings.from_config>`
and the estimator's registered learning rate. Nothing after it reads the
config: :func:`experiments.run.resolved_run.setup`, the tuner, the tools
and the benchmarks take what it returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from experiments.run import config_defaults, multihost, preflight
from experiments.run.settings import Distributed, Settings

if TYPE_CHECKING:
  from zoprivacy.estimators.registry import EstimatorSpec


def resolve(config) -> tuple[Settings, EstimatorSpec]:
  """``(settings, spec)`` of ``config``: its typed settings (the learning
  rate filled) and its estimator's declaration (module docstring)."""
  config, _ = config_defaults.complete(config)
  multihost.initialize(Distributed.from_block(config.get("distributed")))
  spec = preflight.validate(config)  # no data read yet
  return Settings.from_config(config).with_learning_rate(spec), spec
