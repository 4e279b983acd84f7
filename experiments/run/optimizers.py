"""Any optax optimizer by name, with a schedule, from a run's settings."""

from __future__ import annotations

import difflib
import inspect

import optax

from experiments.run import optimizer_names
from experiments.run.settings import Settings


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


def _resolve(settings: Settings):
  """``(factory, learning_rate, schedule, schedule_kwargs, kwargs)``: what
  :func:`make_optimizer` calls, found by name and checked against the
  signatures (an unknown optimizer, schedule or argument, or a missing
  learning rate is refused here), with nothing built."""
  name = settings.optimizer
  factory = getattr(optax, name, None)
  if not callable(factory) or name.endswith("_schedule"):
    raise optimizer_names.unknown_optimizer(name, dir(optax))
  learning_rate = settings.learning_rate
  if learning_rate is None:
    raise ValueError(
      f"Set learning_rate: {settings.estimator} registers no default "
      "learning rate."
    )
  schedule, skw = None, None
  if settings.schedule:
    schedule = getattr(optax, settings.schedule, None)
    if not callable(schedule):
      close = difflib.get_close_matches(
        settings.schedule,
        [n for n in dir(optax) if n.endswith("_schedule")],
        n=3,
      )
      raise ValueError(
        f"Unknown optax schedule {settings.schedule!r}"
        + (f"; did you mean {', '.join(close)}?" if close else ".")
      )
    params = inspect.signature(schedule).parameters
    skw = dict(settings.schedule_kwargs)
    for key in ("init_value", "peak_value"):
      if key in params:
        skw.setdefault(key, learning_rate)
    if "decay_steps" in params:
      skw.setdefault("decay_steps", settings.num_steps)
    _bind(schedule, **skw)
  kwargs = dict(settings.optimizer_kwargs)
  if name == "sgd" and settings.momentum:
    kwargs.setdefault("momentum", settings.momentum)
  _bind(factory, learning_rate, **kwargs)
  return factory, learning_rate, schedule, skw, kwargs


def check_optimizer(settings: Settings) -> None:
  """Every refusal of :func:`make_optimizer` (an unknown optimizer or
  schedule, arguments they do not take, no learning rate), read from names
  and signatures: no optimizer or schedule is built."""
  _resolve(settings)


def make_optimizer(settings: Settings) -> optax.GradientTransformation:
  """Any optax optimizer by name, with ``optimizer_kwargs`` and a schedule.

  ``config.schedule`` names an optax schedule (e.g. 'cosine_decay_schedule')
  built with ``schedule_kwargs``; its ``init_value`` / ``peak_value``
  default to ``learning_rate`` (the estimator's registered one when the
  config sets none: :meth:`~experiments.run.settings.Settings.
  with_learning_rate`) and ``decay_steps`` to ``num_steps``.
  """
  factory, learning_rate, schedule, skw, kwargs = _resolve(settings)
  if schedule is not None:
    learning_rate = schedule(**skw)
  return factory(learning_rate, **kwargs)
