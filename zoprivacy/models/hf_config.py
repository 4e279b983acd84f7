"""A Hugging Face ``config.json`` as a dict, from a path, a folder or a dict.

Every ``<Model>Config.from_hf`` reads, checks and filters its fields here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path


def as_dict(config) -> dict:
  """``config`` as a dict: a mapping is copied; a folder's ``config.json``
  or a JSON file is read."""
  if isinstance(config, Mapping):
    return dict(config)
  path = Path(config)
  return json.loads(
    (path / "config.json" if path.is_dir() else path).read_text()
  )


def require(config: Mapping, key: str, default, supported: tuple) -> None:
  """Refuses a setting the Flax model does not compute (``default`` is
  Hugging Face's value when the key is absent)."""
  value = config.get(key, default)
  if value not in supported:
    raise ValueError(f"{key} {value!r} is not supported (only {supported})")


def config_from_dict(cls, config: Mapping):
  """``cls`` (a dataclass) from the keys of ``config`` that name its fields;
  the rest of a Hugging Face config is ignored."""
  fields = {f.name for f in dataclasses.fields(cls)}
  return cls(**{k: v for k, v in config.items() if k in fields})
