"""Any optax optimizer by name, with a schedule, from a run config."""

from __future__ import annotations

import difflib
import inspect

import ml_collections
import optax

from experiments import preflight


def learning_rate_of(config, spec=None) -> tuple[float | None, str]:
  """``(step size, where it comes from)``: ``config.learning_rate`` when
  set, otherwise the one registered for the estimator (each estimator
  registers the step size that suits it beside its other defaults:
  switching ``--config.estimator`` without a learning rate gets it; one the
  user sets always wins). ``None`` when neither is set (Noisy-ZOGD then
  takes its theorem's step size limit)."""
  value = config.get("learning_rate")
  if value is not None:
    return value, "set by the config"
  if spec is None:
    from zoprivacy.estimators import registry  # pylint: disable=g-import-not-at-top

    spec = registry.get(config.estimator)
  if spec.learning_rate is None:
    return None, "not set"
  return spec.learning_rate, f"{spec.name}'s registered default"


def with_learning_rate(config, spec) -> tuple[ml_collections.ConfigDict, str]:
  """``(config, source)``: ``config`` itself when it sets a learning rate,
  otherwise a copy holding the estimator's registered one (the caller's
  config is not changed)."""
  value, source = learning_rate_of(config, spec)
  if config.get("learning_rate") is not None or value is None:
    return config, source
  config = config.copy_and_resolve_references()
  with config.unlocked():
    config.learning_rate = value
  return config, source


def make_optimizer(
  config: ml_collections.ConfigDict,
) -> optax.GradientTransformation:
  """Any optax optimizer by name, with ``optimizer_kwargs`` and a schedule.

  ``config.schedule`` names an optax schedule (e.g. 'cosine_decay_schedule')
  built with ``schedule_kwargs``; its ``init_value`` / ``peak_value``
  default to ``learning_rate`` and ``decay_steps`` to ``num_steps``.
  """
  name = config.optimizer
  factory = getattr(optax, name, None)
  if not callable(factory) or name.endswith("_schedule"):
    raise preflight.unknown_optimizer(name, dir(optax))
  learning_rate, _ = learning_rate_of(config)
  if learning_rate is None:
    raise ValueError(
      f"Set learning_rate: {config.estimator} registers no default "
      "learning rate."
    )
  if config.get("schedule"):
    schedule = getattr(optax, config.schedule, None)
    if not callable(schedule):
      close = difflib.get_close_matches(
        config.schedule,
        [n for n in dir(optax) if n.endswith("_schedule")],
        n=3,
      )
      raise ValueError(
        f"Unknown optax schedule {config.schedule!r}"
        + (f"; did you mean {', '.join(close)}?" if close else ".")
      )
    params = inspect.signature(schedule).parameters
    skw = dict(config.get("schedule_kwargs") or {})
    for key in ("init_value", "peak_value"):
      if key in params:
        skw.setdefault(key, learning_rate)
    if "decay_steps" in params:
      skw.setdefault("decay_steps", config.num_steps)
    learning_rate = schedule(**skw)
  kwargs = dict(config.get("optimizer_kwargs") or {})
  if name == "sgd" and config.get("momentum"):
    kwargs.setdefault("momentum", config.momentum)
  return factory(learning_rate, **kwargs)
