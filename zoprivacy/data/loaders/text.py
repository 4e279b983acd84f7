"""Text preprocessing: word vocabularies + integer encoding for the LSTM
classifier, and the prompt templates of prompt-based masked-LM fine-tuning.

* PAZO setting (3): LSTM on IMDB from scratch. A vocabulary is a function of
  public data only (:func:`build_vocab` on public text, or the data-free
  :class:`HashingVocab`), never of the private training texts: a vocabulary
  built from them would itself release which words they contain, outside any
  privacy accounting, and would make each record's encoding depend on the
  other records. :func:`encode` then encodes every text, private or public,
  on its own.
* PAZO setting (4) and DPZero / DP-ZO (RoBERTa): prompt-based fine-tuning with
  the LM-BFF / MeZO templates and label words (:func:`mnli_prompt`,
  :func:`sst2_prompt`, :func:`trec_prompt`, :data:`LABEL_WORDS`). The
  prompt's ``<mask>`` position is scored against the label words by
  :class:`zoprivacy.models.prompt_mlm.PromptMLMClassifier`.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

PAD, UNK = "<pad>", "<unk>"
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[!?]")


def tokenize(text: str) -> list[str]:
  """Lower-cases, removes HTML line breaks and splits into word tokens
  (letters/digits with an optional ``'s``-style suffix) plus ``!`` and ``?``."""
  return _TOKEN.findall(_BR.sub(" ", text.lower()))


#: Ids every vocabulary reserves: padding, and unknown words (or the empty text).
PAD_ID, UNK_ID = 0, 1


class Vocab(NamedTuple):
  """Word -> id mapping; id 0 is padding, id 1 unknown words."""

  itos: tuple[str, ...]
  stoi: dict[str, int]

  def __len__(self) -> int:
    return len(self.itos)

  pad_id = PAD_ID  # a class constant, not a field
  unk_id = UNK_ID

  def token_id(self, word: str) -> int:
    return self.stoi.get(word, UNK_ID)


#: Public key of :class:`HashingVocab`'s hash (it need not be secret: the
#: mapping only has to be fixed before any data is seen).
HASH_KEY = b"zoprivacy hashing vocabulary v1"


class HashingVocab(NamedTuple):
  """The hashing trick: word -> ``2 + BLAKE2b(word, key) mod num_buckets``.

  A fixed function of the word alone, so it reads no data at all: the same
  table size as a :class:`Vocab` of ``num_buckets`` words (id 0 padding, id
  1 the empty text), every word known, distinct words sharing a bucket
  where they collide.
  """

  num_buckets: int
  key: bytes = HASH_KEY

  def __len__(self) -> int:
    return self.num_buckets + 2

  pad_id = PAD_ID  # a class constant, not a field
  unk_id = UNK_ID

  def token_id(self, word: str) -> int:
    digest = hashlib.blake2b(
      word.encode("utf-8"), key=self.key, digest_size=8
    ).digest()
    return 2 + int.from_bytes(digest, "big") % self.num_buckets


def build_vocab(
  public_texts: Iterable[str], max_size: int = 10_000, min_freq: int = 1
) -> Vocab:
  """The ``max_size`` most frequent tokens of ``public_texts`` (ties broken
  alphabetically, so the result is deterministic), after ``<pad>`` and
  ``<unk>``.

  The texts must be public: the vocabulary lists words that occur in them,
  and every text encoded with it depends on all of them.
  """
  counts = collections.Counter()
  for t in public_texts:
    counts.update(tokenize(t))
  words = sorted(
    (w for w, c in counts.items() if c >= min_freq),
    key=lambda w: (-counts[w], w),
  )[:max_size]
  itos = (PAD, UNK) + tuple(words)
  return Vocab(itos, {w: i for i, w in enumerate(itos)})


def encode(
  texts: Sequence[str],
  vocab: Vocab | HashingVocab,
  max_len: int,
  truncate: str = "end",
) -> tuple[np.ndarray, np.ndarray]:
  """Encodes texts as ``[N, max_len]`` int32 ids (right-padded with 0) and
  ``[N]`` int32 lengths (at least 1; an empty text becomes one ``<unk>``).
  ``truncate="end"`` keeps the first ``max_len`` tokens, ``"start"`` the last.
  Each row depends on its own text, ``vocab`` and ``max_len`` only."""
  if truncate not in ("end", "start"):
    raise ValueError(f"truncate must be 'end' or 'start', got {truncate!r}")
  token_id = functools.lru_cache(maxsize=None)(vocab.token_id)
  ids = np.zeros((len(texts), max_len), dtype=np.int32)
  lengths = np.zeros((len(texts),), dtype=np.int32)
  for i, t in enumerate(texts):
    toks = [token_id(w) for w in tokenize(t)] or [vocab.unk_id]
    toks = toks[:max_len] if truncate == "end" else toks[-max_len:]
    ids[i, : len(toks)] = toks
    lengths[i] = len(toks)
  return ids, lengths


#: Label words per task, index-aligned with the loaders' class ids, with the
#: leading space that RoBERTa's BPE needs (LM-BFF / MeZO convention).
LABEL_WORDS: dict[str, tuple[str, ...]] = {
  "mnli": (" Yes", " Maybe", " No"),  # entailment, neutral, contradiction
  "snli": (" Yes", " Maybe", " No"),
  "sst2": (" terrible", " great"),  # negative, positive
  "sst5": (" terrible", " bad", " okay", " good", " great"),
  "rte": (" Yes", " No"),  # entailment, not_entailment
  # LM-BFF's TREC classes: DESC, ENTY, ABBR, HUM, LOC, NUM (loaders.lm_bff)
  "trec": (
    " Description",
    " Entity",
    " Expression",
    " Human",
    " Location",
    " Number",
  ),
}


def mnli_prompt(
  premise: str, hypothesis: str, mask_token: str = "<mask>"
) -> str:
  """MeZO / LM-BFF MNLI template ``*cls**sent-_0*?*mask*,*+sentl_1**sep+*``:
  premise without its last character, ``?``, the mask, ``,``, a space and the
  hypothesis with its first letter lower-cased (CLS/SEP added by the tokenizer)."""
  premise = premise.strip()
  hypothesis = hypothesis.strip()
  hyp = hypothesis[:1].lower() + hypothesis[1:]
  return f"{premise[:-1]}?{mask_token}, {hyp}"


def sst2_prompt(sentence: str, mask_token: str = "<mask>") -> str:
  """MeZO / LM-BFF SST-2 template ``*cls**sent_0*_It_was*mask*.*sep+*``."""
  return f"{sentence.strip()} It was{mask_token}."


def trec_prompt(question: str, mask_token: str = "<mask>") -> str:
  """MeZO / LM-BFF TREC template ``*cls**mask*:*+sent_0**sep+*``."""
  return f"{mask_token}: {question.strip()}"


def prompts_for(
  task: str, inputs: np.ndarray, mask_token: str = "<mask>"
) -> list[str]:
  """Applies the task's template to a loader's ``inputs`` array (MeZO's
  ``medium_models/run_fewshot.sh``: RTE takes the MNLI template, SST-5 the
  SST-2 one)."""
  if task in ("mnli", "snli", "rte"):
    return [mnli_prompt(p, h, mask_token) for p, h in inputs]
  if task in ("sst2", "sst5"):
    return [sst2_prompt(s, mask_token) for s in inputs]
  if task == "trec":
    return [trec_prompt(q, mask_token) for q in inputs]
  raise ValueError(
    f"no prompt template for task {task!r}; known: {sorted(LABEL_WORDS)}"
  )


def label_word_ids(
  task: str, token_to_id, words: Sequence[str] | None = None
) -> np.ndarray:
  """Ids of the task's label words; ``token_to_id(word) -> int`` must map each
  word (with its leading space) to a single vocabulary entry."""
  words = LABEL_WORDS[task] if words is None else words
  return np.asarray([int(token_to_id(w)) for w in words], dtype=np.int32)
