"""The frozen trunk's hidden states of a split causal LM, computed once and
kept on disk (:mod:`zoprivacy.models.llama_split`).

The states of the frozen blocks are a deterministic function of the public
weights and of each example's tokens. Computing them is the expensive part
of a run whose top blocks alone train (one forward pass of the trunk over
every training and test example, several minutes on two CPU cores); a
cache makes the next run with the same model, data and split start at once,
and a run with more frozen blocks start from a shallower split's entry
(running only the blocks in between).

A cache entry is keyed by the SHA-256 of everything the states depend on:
the weights' files (their bytes), the number of frozen blocks, the
parameter dtype, and the token ids and attention mask of every row. Any
change misses. Entries hold states of private examples, as sensitive as the
text they come from: the folder is created owner-only (0700) and every file
0600, written to a temporary name and renamed (a crash leaves no partial
entry). ``config.state_cache=False`` computes without reading or writing.
Default folder: ``$ZOPRIVACY_DATA_DIR/llm_states`` (else
``~/.cache/zoprivacy/llm_states``), or ``config.state_cache_dir``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from zoprivacy.data.loaders import base


def file_digest(paths) -> str:
  """SHA-256 over the bytes of ``paths`` (in the given order)."""
  h = hashlib.sha256()
  for path in paths:
    with open(path, "rb") as f:
      for chunk in iter(lambda: f.read(1 << 22), b""):
        h.update(chunk)
  return h.hexdigest()


def cache_dir(config) -> Path | None:
  """The cache folder, or None when ``config.state_cache`` is off."""
  if config.get("state_cache") is False:
    return None
  chosen = config.get("state_cache_dir") or ""
  return (
    Path(chosen).expanduser() if chosen else base.data_root() / "llm_states"
  )


def entry_key(model_digest: str, frozen_blocks: int, dtype: str, inputs) -> str:
  """The cache key of the states of ``inputs`` (``input_ids`` and
  ``attention_mask``) under the given weights and split."""
  h = hashlib.sha256()
  head = dict(model=model_digest, frozen_blocks=frozen_blocks, dtype=dtype)
  h.update(json.dumps(head, sort_keys=True).encode())
  for name in ("input_ids", "attention_mask"):
    a = np.ascontiguousarray(inputs[name])
    h.update(f"{name}{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())
  return h.hexdigest()


def _write(path: Path, states: np.ndarray) -> None:
  path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
  os.chmod(path.parent, 0o700)
  tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
  fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
  with os.fdopen(fd, "wb") as f:
    np.save(f, states, allow_pickle=False)
  os.replace(tmp, path)


def _progress(what: str):
  start = time.time()

  def report(done: int, total: int) -> None:
    if done == total or done % 256 < 32:
      rate = done / max(time.time() - start, 1e-9)
      print(
        f"\r{what}: trunk states {done}/{total} ({rate:.1f} examples/s)",
        end="\n" if done == total else "",
        file=sys.stderr,
        flush=True,
      )

  return report


def _lookup(folder: Path, key_parts: tuple, inputs: dict):
  """``(path of the exact entry, (states, blocks) of the deepest shallower
  entry or None)``."""
  digest, frozen, dtype = key_parts
  path = folder / f"{entry_key(digest, frozen, dtype, inputs)}.npy"
  for blocks in range(frozen - 1, -1, -1):
    shallower = folder / f"{entry_key(digest, blocks, dtype, inputs)}.npy"
    if shallower.is_file():
      return path, (np.load(shallower, allow_pickle=False), blocks)
  return path, None


def states(config, key_parts: tuple, inputs: dict, compute, what: str):
  """The trunk states of ``inputs``: from the cache when an entry for
  ``key_parts`` (``(model digest, frozen blocks, dtype)``) and these
  inputs exists; else ``compute(input_ids, attention_mask, start,
  progress)``, starting from the deepest cached shallower split's states
  (``start=(states, blocks)``, or None), then stored."""
  folder = cache_dir(config)
  path = start = None
  if folder is not None:
    path = folder / f"{entry_key(*key_parts, inputs)}.npy"
    if path.is_file():
      return np.load(path, allow_pickle=False)
    path, start = _lookup(folder, key_parts, inputs)
  out = compute(
    inputs["input_ids"], inputs["attention_mask"], start, _progress(what)
  )
  if path is not None:
    _write(path, out)
  return out
