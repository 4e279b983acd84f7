"""The files a causal-LM run needs, checked before anything is loaded.

A Hugging Face checkpoint folder (``config.model_dir``) needs
``config.json``; the weights, ``model.safetensors`` or
``model.safetensors.index.json`` with every shard it names; and the
tokenizer, ``tokenizer.json`` (or, for OPT's byte-level BPE, ``vocab.json``
+ ``merges.txt``). :func:`missing_model_files` lists what is absent, without
reading a weight, so a run stops within a second naming each file, the model
family and where to download it.

The family (OPT, Llama or Mistral) is ``config.json``'s ``model_type`` when
the folder has one, else ``config.model_family``, else a family named in the
folder's name, else OPT.
"""

from __future__ import annotations

import json
from pathlib import Path

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# family -> (name, an example checkpoint on the Hugging Face hub)
FAMILIES = {
  "opt": ("OPT", "facebook/opt-1.3b"),
  "llama": ("Llama", "meta-llama/Llama-2-7b-hf"),
  "mistral": ("Mistral", "mistralai/Mistral-7B-v0.1"),
}


def _model_type(root: Path | None) -> str | None:
  if root is None or not (root / "config.json").is_file():
    return None
  try:
    model_type = json.loads((root / "config.json").read_text())["model_type"]
  except (ValueError, KeyError, TypeError) as e:
    raise ValueError(
      f"{root / 'config.json'} is not a Hugging Face model config with a "
      f"model_type ({type(e).__name__}: {e})."
    ) from e
  if model_type not in FAMILIES:
    raise ValueError(
      f"{root}: model_type {model_type!r} is not a supported causal LM; "
      f"use an {', '.join(n for n, _ in FAMILIES.values())} checkpoint."
    )
  return model_type


def model_family(config) -> str:
  """``'opt'``, ``'llama'`` or ``'mistral'`` (see the module docstring)."""
  model_dir = config.get("model_dir") or ""
  root = Path(model_dir).expanduser() if model_dir else None
  found = _model_type(root)
  if found:
    return found
  declared = config.get("model_family") or ""
  if declared:
    if declared not in FAMILIES:
      raise ValueError(
        f"model_family={declared!r}; use one of {sorted(FAMILIES)}."
      )
    return declared
  name = root.name.lower() if root else ""
  return next((f for f in ("mistral", "llama") if f in name), "opt")


def _weights_missing(root: Path) -> list[str]:
  index = root / INDEX_FILE
  if index.is_file():
    try:
      shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    except (ValueError, KeyError, TypeError, AttributeError):
      return [f"{INDEX_FILE} (unreadable: no weight_map)"]
    return [s for s in shards if not (root / s).is_file()]
  if (root / SINGLE_FILE).is_file():
    return []
  return [f"{SINGLE_FILE} (or {INDEX_FILE} and its shards)"]


def _tokenizer_missing(root: Path, family: str) -> list[str]:
  if (root / "tokenizer.json").is_file():
    return []
  if (root / "vocab.json").is_file() and (root / "merges.txt").is_file():
    return []
  if family == "opt":
    return ["tokenizer.json (or vocab.json + merges.txt)"]
  return ["tokenizer.json"]


def how_to_get(family: str, model_dir: str) -> str:
  name, repo = FAMILIES[family]
  folder = model_dir or "<folder>"
  return (
    f"download the {name} checkpoint's config.json, *.safetensors (with "
    f"{INDEX_FILE} if sharded) and tokenizer files from its Hugging Face "
    f"page, e.g. https://huggingface.co/{repo} (`huggingface-cli download "
    f"{repo} config.json '*.safetensors*' tokenizer.json "
    f"--local-dir {folder}`; pytorch_model.bin is not read), and set "
    f"config.model_dir to that folder."
  )


def missing_model_files(config) -> tuple[str, list[str], str]:
  """``(what, missing paths, how to get them)`` of ``config.model_dir``;
  ``missing`` is empty when the folder has every file a run reads."""
  family = model_family(config)
  model_dir = str(config.get("model_dir") or "")
  what = f"{FAMILIES[family][0]} checkpoint folder"
  how = how_to_get(family, model_dir)
  if not model_dir:
    files = ["config.json", SINGLE_FILE, "tokenizer.json"]
    return (
      f"{what} (config.model_dir is not set)",
      [f"<config.model_dir>/{f}" for f in files],
      how,
    )
  root = Path(model_dir).expanduser()
  missing = [] if (root / "config.json").is_file() else ["config.json"]
  missing += _weights_missing(root) + _tokenizer_missing(root, family)
  return f"{what} {root}", [str(root / m) for m in missing], how
