"""A config written from scratch gets ``configs/default.py``'s values for
whatever it leaves out.

A config file need not start from ``configs/default.py``: one that sets
only ``dataset``, ``estimator``, ``num_steps`` (or ``num_epochs``) and a
``privacy`` block with ``target_epsilon``, ``delta`` and
``expected_batch_size`` runs. :func:`complete` adds every field of the
default schema the config lacks, with the default's value, and the fixed
blocks (``privacy``, ``mesh``, ``distributed``) key by key; it returns the
names it added, which the run prints on its first lines (:func:`note`) and
writes to ``result.json`` (``defaults_filled``).

Where the default's value belongs to the default's choices, a config that
makes other choices gets the neutral value instead:

- ``estimator_kwargs``, ``privacy.clip``: DPZero's (the default estimator's)
  only for DPZero; any other estimator gets its own registered defaults
  (an empty ``estimator_kwargs``, ``privacy.clip = None``);
- ``model_kwargs``: the default CNN's sizes only for the CNN;
- ``privacy.target_epsilon``: none when the block sets ``noise_multiplier``
  (a set multiplier is the run's noise);
- ``num_steps``: none when the config sets ``num_epochs`` (one length).

Fields the run does not read (a typo, ``config.target_epsilon`` of earlier
releases) are not touched here: :func:`experiments.run.config_fields.check`
refuses them, naming the field meant. The command line completes the file
as it loads it (before its ``--config.<field>`` overrides apply, so any
field of the schema can be overridden); ``train.train`` completes a config
built in Python the same way.

Importing this module imports nothing heavy (the command line runs it
before JAX loads).
"""

from __future__ import annotations

import copy
import pathlib
import re
from collections.abc import Mapping

import ml_collections
from ml_collections import config_dict

from configs import default

# Blocks merged key by key (the others are filled whole, when missing).
MERGED = ("privacy", "mesh", "distributed")
# Privacy fields whose values the note shows (they decide the guarantee).
SHOWN = ("privacy.",)


def _neutral(config, defaults, path: str):
  """The value a missing field gets when the default's would belong to a
  choice the config did not make (module docstring); ``...``: the
  default's own value."""
  if path in ("estimator_kwargs", "privacy.clip"):
    if config.get("estimator", defaults.estimator) != defaults.estimator:
      return {} if path == "estimator_kwargs" else None
  if path == "model_kwargs" and config.get("model", defaults.model) != (
    defaults.model
  ):
    return {}
  if path == "privacy.target_epsilon":
    block = config.get("privacy") or {}
    if block.get("noise_multiplier") is not None:
      return None
  if path == "num_steps" and config.get("num_epochs") is not None:
    return None
  return ...


def as_config(config) -> ml_collections.ConfigDict:
  """``config`` as a ``ConfigDict`` (a plain mapping is converted)."""
  if isinstance(config, ml_collections.ConfigDict):
    return config
  if isinstance(config, Mapping):
    return ml_collections.ConfigDict(dict(config))
  raise ValueError(
    f"a run config is an ml_collections.ConfigDict (or a dict), got "
    f"{type(config).__name__}: get_config() must return one. The simplest "
    "start is configs/default.py's (config = default.get_config())."
  )


def _fill(node, defaults_node, key: str, neutral) -> None:
  """Adds ``key`` to ``node``: the default's value (``neutral``: ``...``)
  or ``neutral``; ``None`` as a typed placeholder, so that a later
  ``--config.<key>=<value>`` is parsed as the default's type."""
  value = copy.deepcopy(defaults_node[key]) if neutral is ... else neutral
  if value is None:
    value = config_dict.placeholder(defaults_node.get_type(key))
  with node.unlocked():
    node[key] = value


def complete(config) -> tuple[ml_collections.ConfigDict, list[str]]:
  """``(config, filled)``: ``config`` with every field of
  ``configs/default.py`` it lacks added (the caller's config is not
  changed: a copy when anything is added), and the dotted names added."""
  config = as_config(config)
  defaults = default.get_config()
  missing = [k for k in defaults if k not in config]
  partial = [
    b
    for b in MERGED
    if isinstance(config.get(b), Mapping | ml_collections.ConfigDict)
    and any(k not in config[b] for k in defaults[b])
  ]
  widened = _ints_of_floats(config, defaults)
  if not missing and not partial and not widened:
    return config, []
  out = copy.deepcopy(config)
  out.unlock()
  for node, key in _nodes(out, widened):
    with node.ignore_type():
      node[key] = float(node[key])
  filled = []
  for key in missing:
    _fill(out, defaults, key, _neutral(config, defaults, key))
    filled.append(key)
  for block in partial:
    for key in defaults[block]:
      if key not in out[block]:
        path = f"{block}.{key}"
        _fill(
          out[block], defaults[block], key, _neutral(config, defaults, path)
        )
        filled.append(path)
  return out, filled


def _ints_of_floats(config, defaults) -> list[str]:
  """The fields a config sets to an int where the default holds a float
  (``num_epochs = 3``, ``target_epsilon = 2``): made floats, so that an
  override ``--config.num_epochs=0.5`` parses as the default's type."""
  out = []
  for block in (None, *MERGED):
    node = config if block is None else config.get(block)
    ref = defaults if block is None else defaults[block]
    if not isinstance(node, ml_collections.ConfigDict):
      continue
    for key in node:
      value = node[key]
      if (
        key in ref
        and ref.get_type(key) is float
        and isinstance(value, int)
        and not isinstance(value, bool)
      ):
        out.append(key if block is None else f"{block}.{key}")
  return out


def _nodes(config, paths):
  """``(block, key)`` of each dotted path."""
  for path in paths:
    *block, key = path.split(".")
    yield (config[block[0]] if block else config), key


def not_overridden(filled, argv) -> list[str]:
  """The names of ``filled`` that no ``--config.<field>=...`` of ``argv``
  sets (nor the block holding it): those the run takes from the default."""
  given = {a.split("=")[0].removeprefix("--config.") for a in argv}
  return [
    f for f in filled if not any(f == g or f.startswith(g + ".") for g in given)
  ]


def note(config, filled) -> str | None:
  """The run's first line when fields came from the default (``config``:
  the completed config): the privacy fields with their values, the others
  by name."""
  if not filled:
    return None
  shown, named = [], []
  for path in filled:
    if path.startswith(SHOWN):
      block, key = path.split(".", 1)
      shown.append(f"{path}={config[block][key]!r}")
    else:
      named.append(path)
  return (
    f"note: the config leaves {len(filled)} fields to configs/default.py "
    f"(result.json's defaults_filled): {', '.join(shown + named)}."
  )


CONFIGS = pathlib.Path(default.__file__).parent


def missing_field(error: BaseException) -> str | None:
  """One paragraph for ``ConfigDict``'s ``AttributeError`` on a field the
  config lacks and the default cannot give (a task's own field with no
  default, such as the logistic-regression tasks' ``l2``): the field, how
  to set it and a config of ``configs/`` that sets it. ``None`` for any
  other error."""
  cause = error.args[0] if error.args else None
  if not isinstance(error, AttributeError) or not isinstance(cause, KeyError):
    return None
  name = str(cause.args[0] if cause.args else "").strip("'\"")
  if not name.isidentifier():
    return None
  pattern = re.compile(rf"^\s*config\.{name}\s*=", re.M)
  files = [
    p.name
    for p in sorted(CONFIGS.glob("*.py"))
    if pattern.search(p.read_text())
  ]
  start = f" configs/{files[0]} sets it: start from it." if files else ""
  return (
    f"the config has no field {name!r}, which this run reads (its task or "
    "estimator takes it, with no default in configs/default.py): set "
    f"config.{name} (or --config.{name}=<value>).{start}"
  )
