"""An estimator switched on the command line: its ``estimator_kwargs`` and
``privacy.clip``.

``--config.estimator=<name>`` on a config written for another estimator
gives the new estimator its registered defaults, carries over what it
takes and has no default for, applies the command line's own values on
top, and sets ``privacy.clip`` back to the new estimator's default (each
clips its own quantity) unless the command line sets it.
"""

from __future__ import annotations

import inspect
import sys

from experiments.run import privacy_config


def switched_kwargs(old: dict, accepted, defaults: dict, given: dict):
  """``(new estimator_kwargs, what was carried, reset and dropped)`` when a
  command line switches to an estimator that takes ``accepted`` and
  registers ``defaults`` (see :func:`switch_estimator_kwargs`)."""
  carried = [
    k for k in old if k in accepted and k not in defaults and k not in given
  ]
  changes = {
    "carried over": carried,
    "reset to the registered default": [
      k for k in old if k in defaults and old[k] != defaults[k]
    ],
    "dropped (not taken)": [k for k in old if k not in accepted],
  }
  new = dict(defaults, **{k: old[k] for k in carried}, **given)
  return new, {k: [n for n in v if n not in given] for k, v in changes.items()}


def switch_estimator_kwargs(config, spec, given: dict) -> dict:
  """``estimator_kwargs`` for a switched estimator: its registered defaults,
  the config's values it takes but has no default for (carried over), and
  ``given`` (the command line's) on top; ``privacy.clip`` is the new
  estimator's default (:func:`reset_clip`). Returns what was carried,
  reset and dropped."""
  new, changes = switched_kwargs(
    dict(config.estimator_kwargs),
    inspect.signature(spec.factory).parameters,
    dict(spec.defaults),
    given,
  )
  reset = reset_clip(config)
  # A registered default that the privacy block holds (Noisy-ZOGD's
  # setting registers its clip) goes there, not into estimator_kwargs.
  for name in privacy_config.MOVED_KWARGS:
    if name in new and name not in given and name in config.privacy:
      value = new.pop(name)
      if config.privacy.get(name) is None:
        with config.privacy.unlocked():
          config.privacy[name] = value
  with config.unlocked():
    config.estimator_kwargs = new
  if reset and spec.private:
    changes["reset to the registered default"].append("privacy.clip")
  return changes


def reset_clip(config) -> bool:
  """On an estimator switch, ``privacy.clip`` back to the new estimator's
  default (each clips its own quantity), unless the command line sets it;
  whether it was reset."""
  if any(a.startswith("--config.privacy.clip=") for a in sys.argv):
    return False
  if config.privacy.get("clip") is None:
    return False
  with config.privacy.unlocked():
    config.privacy.clip = None
  return True
