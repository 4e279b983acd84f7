"""Any optax optimizer by name, with a schedule, from a run config."""

from __future__ import annotations

import difflib
import inspect

import ml_collections
import optax

from experiments import preflight


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
  learning_rate = config.learning_rate
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
        skw.setdefault(key, config.learning_rate)
    if "decay_steps" in params:
      skw.setdefault("decay_steps", config.num_steps)
    learning_rate = schedule(**skw)
  kwargs = dict(config.get("optimizer_kwargs") or {})
  if name == "sgd" and config.get("momentum"):
    kwargs.setdefault("momentum", config.momentum)
  return factory(learning_rate, **kwargs)
