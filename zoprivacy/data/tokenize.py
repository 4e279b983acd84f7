"""Hugging Face ``tokenizer.json`` loading and fixed-shape token-id arrays."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def pad_to(
  rows: Sequence[Sequence[int]], length: int, pad_id: int
) -> tuple[np.ndarray, np.ndarray]:
  """``(ids, mask)`` int32 ``[N, length]``, right-padded with ``pad_id``."""
  ids = np.full((len(rows), length), pad_id, np.int32)
  mask = np.zeros((len(rows), length), np.int32)
  for i, r in enumerate(rows):
    r = list(r)[:length]
    ids[i, : len(r)] = r
    mask[i, : len(r)] = 1
  return ids, mask


def fit_around_mask(ids: Sequence[int], length: int, mask_id: int) -> list:
  """Cuts a ``[CLS] body [SEP]`` token list to ``length`` keeping the mask token.

  Keeps the first and last (special) tokens and a window of the body that
  contains the mask, with up to half the budget after the mask (the
  hypothesis of an NLI prompt; the closing ``.`` of SST-2's). So a long
  sentence or premise loses its beginning rather than the mask.
  """
  ids = list(ids)
  if len(ids) <= length:
    return ids
  body, budget = ids[1:-1], length - 2
  if mask_id not in body:
    raise ValueError("prompt has no mask token")
  m = body.index(mask_id)
  after = min(len(body) - m - 1, budget // 2)
  start = max(0, min(m, m + 1 + after - budget))
  window = body[start : start + budget]
  return [ids[0]] + window + [ids[-1]]


def label_word_ids(tokenizer, words: Sequence[str]) -> list:
  """Vocabulary ids of the label words (leading space included, as RoBERTa's
  BPE spells them ``Ġword``); each word must be a single token."""
  out = []
  for w in words:
    ids = tokenizer.encode(w, add_special_tokens=False).ids
    if len(ids) != 1:
      alt = tokenizer.token_to_id("\u0120" + w.strip())
      if alt is None:
        raise ValueError(f"label word {w!r} is not a single token ({ids})")
      ids = [alt]
    out.append(int(ids[0]))
  return out


def load_tokenizer(model_dir, max_length: int = 128):
  """A ``tokenizers.Tokenizer`` from ``tokenizer.json`` that pads to the longest
  sequence in a batch and truncates to ``max_length``."""
  from tokenizers import Tokenizer

  tok = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
  tok.enable_truncation(max_length)
  if tok.padding:
    pad_id, pad_token = tok.padding["pad_id"], tok.padding["pad_token"]
  else:  # BERT vocabularies use [PAD] (id 0), RoBERTa's BPE <pad> (id 1)
    pad_token = next(
      (t for t in ("[PAD]", "<pad>") if tok.token_to_id(t) is not None),
      None,
    )
    if pad_token is None:
      raise ValueError(
        f"{model_dir}: tokenizer has no padding config and no [PAD]/<pad> token"
      )
    pad_id = tok.token_to_id(pad_token)
  tok.enable_padding(pad_id=pad_id, pad_token=pad_token)
  return tok


def tokenize_batch(tokenizer, texts, pairs=None):
  """``(input_ids, attention_mask, token_type_ids)`` int32 arrays ``[N, L]``."""
  enc = (
    tokenizer.encode_batch(list(texts))
    if pairs is None
    else tokenizer.encode_batch(list(zip(texts, pairs)))
  )
  ids = np.asarray([e.ids for e in enc], np.int32)
  mask = np.asarray([e.attention_mask for e in enc], np.int32)
  types = np.asarray([e.type_ids for e in enc], np.int32)
  return ids, mask, types
