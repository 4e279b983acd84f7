"""A Hugging Face ``config.json`` as a dict, from a path, a folder or a dict.

Every ``<Model>Config.from_hf`` reads its fields from this one place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path


def hf_config_dict(config) -> dict:
  """``config`` as a dict: a mapping is copied; a folder's ``config.json``
  or a JSON file is read."""
  if isinstance(config, Mapping):
    return dict(config)
  path = Path(config)
  return json.loads(
    (path / "config.json" if path.is_dir() else path).read_text()
  )
