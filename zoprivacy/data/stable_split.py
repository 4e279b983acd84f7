"""Neighbour-stable splits: each record's side from a keyed hash of itself.

A split of private data whose parts feed a private mechanism must keep
neighbouring datasets neighbouring: adding or removing one record may change
the parts by that record only. A seeded permutation does not: on digits'
1,438 training images, adding one image moves about 137 others out of a
287-image held-out part and as many into it, so a guarantee accounted for
one record would really cover a group of about 270.

Here every record is read as a number ``u`` in ``[0, 1)``: the first 53 bits
of BLAKE2b of the record's bytes, keyed by a public seed and the split's
purpose (:func:`record_uniforms`). ``u`` depends on the record alone, so

* :func:`below` (``u < rate``, ``rate`` a public number per class or for
  all): independent per-record coins. Adding or removing a record moves no
  other record; each part's size then depends on the data (binomial).
* :func:`lowest` (the ``k`` records of smallest ``u``, per class or in all):
  exactly ``k`` records. Adding a record that ranks among the ``k`` displaces
  the ``k``-th, removing a selected one promotes the ``(k+1)``-th: the
  selected sets of two neighbouring datasets differ by at most one record in
  and one out, and their complements by exactly one record in or out.

The key is public: which records are held out is not secret (DP protects a
record's presence, and the side a record would take is a public function of
it); only the stability matters. Records with identical inputs hash alike
and take the same side; among identical records :func:`lowest` keeps the
first ones (identical records are interchangeable).

A record's bytes are its inputs as the caller holds them: a numeric row's
dtype, shape and bytes, a text row's strings, a dict's (JSON, sorted keys),
or every leaf of a dict or tuple of arrays. An encoding that depends on
other records (a vocabulary built from the data) would break the property:
hash the raw records.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import numpy as np


def _array_rows(inputs: np.ndarray) -> Iterator[bytes]:
  """Each row's canonical bytes: a numeric row's dtype, shape and bytes; a
  text row's strings joined by ``\\x1f``."""
  if inputs.dtype == object or inputs.dtype.kind in "US":
    for row in inputs:
      fields = [row] if np.ndim(row) == 0 else list(np.ravel(row))
      if all(isinstance(f, dict) for f in fields):
        yield json.dumps(fields, sort_keys=True, default=str).encode("utf-8")
      else:
        yield "\x1f".join(map(str, fields)).encode("utf-8")
    return
  prefix = f"{inputs.dtype.str}{inputs.shape[1:]}".encode()
  for row in inputs:
    yield prefix + np.ascontiguousarray(row).tobytes()


def _leaves(tree) -> list[np.ndarray]:
  """A dict's values in key order, a tuple's or list's in order, or the
  array itself (a list of dicts or strings is one array of records)."""
  if isinstance(tree, dict):
    return [leaf for k in sorted(tree) for leaf in _leaves(tree[k])]
  if isinstance(tree, tuple):
    return [leaf for t in tree for leaf in _leaves(t)]
  if isinstance(tree, list) and tree and isinstance(tree[0], dict):
    out = np.empty(len(tree), dtype=object)
    out[:] = tree
    return [out]
  return [np.asarray(tree)]


def record_bytes(inputs) -> Iterator[bytes]:
  """Each record's bytes, from the record alone (the module docstring).
  Several leaves are joined with their lengths, so no two differ only in
  where one leaf ends."""
  leaves = _leaves(inputs)
  if len(leaves) == 1:
    yield from _array_rows(leaves[0])
    return
  sizes = {len(leaf) for leaf in leaves}
  if len(sizes) != 1:
    raise ValueError(f"Input leaves hold different numbers of rows: {sizes}.")
  for rows in zip(*(_array_rows(leaf) for leaf in leaves)):
    yield b"".join(len(r).to_bytes(8, "little") + r for r in rows)


def split_key(seed: int, purpose: str) -> bytes:
  """The BLAKE2b key of a split: the public ``seed`` and ``purpose``."""
  return hashlib.sha256(
    f"zoprivacy split\x00{purpose}\x00{int(seed)}".encode()
  ).digest()


def uniform(record: bytes, key: bytes) -> float:
  """``u`` of one record's bytes (:func:`record_bytes`) under ``key``."""
  draw = hashlib.blake2b(record, key=key, digest_size=8).digest()
  return (int.from_bytes(draw, "big") >> 11) * 2.0**-53


def record_uniforms(inputs, *, seed: int, purpose: str) -> np.ndarray:
  """``u`` in ``[0, 1)`` of every record (float64, multiples of 2^-53):
  BLAKE2b of its bytes keyed by the public ``seed`` and ``purpose``."""
  key = split_key(seed, purpose)
  draws = [uniform(r, key) for r in record_bytes(inputs)]
  return np.asarray(draws, dtype=np.float64)


def below(u: np.ndarray, rate, labels: np.ndarray | None = None) -> np.ndarray:
  """The mask ``u < rate`` (``rate`` a number, or one per class indexed by
  ``labels``): each record by its own coin."""
  rate = np.asarray(rate, dtype=np.float64)
  if rate.ndim:
    rate = rate[np.asarray(labels)]
  return np.asarray(u) < rate


def lowest(u: np.ndarray, k: int, labels: np.ndarray | None = None):
  """Sorted indices of the ``k`` smallest ``u`` (of every class of
  ``labels``, if given); raises if a class has fewer than ``k`` records."""
  u = np.asarray(u)
  groups = [np.arange(len(u))]
  if labels is not None:
    labels = np.asarray(labels)
    groups = [np.flatnonzero(labels == c) for c in np.unique(labels)]
  chosen = []
  for idx in groups:
    if len(idx) < k:
      name = "" if labels is None else f"class {labels[idx[0]]} "
      raise ValueError(f"{name}has {len(idx)} examples, fewer than k={k}")
    chosen.append(idx[np.argsort(u[idx], kind="stable")[:k]])
  return np.sort(np.concatenate(chosen)).astype(np.int64)
