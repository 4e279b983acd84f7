"""Any optax optimizer by name, with a schedule, from a run config."""

from __future__ import annotations

import difflib
import inspect

import ml_collections
import optax

from experiments.run import optimizer_names


def learning_rate_of(config, spec) -> tuple[float | None, str]:
  """``(step size, where it comes from)``: ``config.learning_rate`` when
  set, otherwise the one registered for the estimator (each estimator
  registers the step size that suits it beside its other defaults:
  switching ``--config.estimator`` without a learning rate gets it; one the
  user sets always wins). ``None`` when neither is set (Noisy-ZOGD then
  takes its theorem's step size limit)."""
  value = config.get("learning_rate")
  if value is not None:
    return value, "set by the config"
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


def _bind(fn, *args, **kwargs) -> None:
  """The ``TypeError`` calling ``fn(*args, **kwargs)`` would raise for its
  arguments, without calling it."""
  try:
    signature = inspect.signature(fn)
  except (TypeError, ValueError):  # no signature to read: the call decides
    return
  try:
    signature.bind(*args, **kwargs)
  except TypeError as err:  # Python's own words, with the name it omits
    name = getattr(fn, "__name__", repr(fn))
    raise TypeError(f"{name}() {err}") from None


def _resolve(config, *, spec):
  """``(factory, learning_rate, schedule, schedule_kwargs, kwargs)``: what
  :func:`make_optimizer` calls, found by name and checked against the
  signatures (an unknown optimizer, schedule or argument, or a missing
  learning rate is refused here), with nothing built."""
  name = config.optimizer
  factory = getattr(optax, name, None)
  if not callable(factory) or name.endswith("_schedule"):
    raise optimizer_names.unknown_optimizer(name, dir(optax))
  learning_rate, _ = learning_rate_of(config, spec)
  if learning_rate is None:
    raise ValueError(
      f"Set learning_rate: {config.estimator} registers no default "
      "learning rate."
    )
  schedule, skw = None, None
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
    _bind(schedule, **skw)
  kwargs = dict(config.get("optimizer_kwargs") or {})
  if name == "sgd" and config.get("momentum"):
    kwargs.setdefault("momentum", config.momentum)
  _bind(factory, learning_rate, **kwargs)
  return factory, learning_rate, schedule, skw, kwargs


def check_optimizer(config, *, spec) -> None:
  """Every refusal of :func:`make_optimizer` (an unknown optimizer or
  schedule, arguments they do not take, no learning rate), read from names
  and signatures: no optimizer or schedule is built."""
  _resolve(config, spec=spec)


def make_optimizer(
  config: ml_collections.ConfigDict, *, spec
) -> optax.GradientTransformation:
  """Any optax optimizer by name, with ``optimizer_kwargs`` and a schedule.

  ``config.schedule`` names an optax schedule (e.g. 'cosine_decay_schedule')
  built with ``schedule_kwargs``; its ``init_value`` / ``peak_value``
  default to ``learning_rate`` and ``decay_steps`` to ``num_steps``.
  ``spec``: the run's estimator declaration (its registered learning rate).
  """
  factory, learning_rate, schedule, skw, kwargs = _resolve(config, spec=spec)
  if schedule is not None:
    learning_rate = schedule(**skw)
  return factory(learning_rate, **kwargs)
