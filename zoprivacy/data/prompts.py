"""MeZO's causal-LM prompt templates and candidate sequences with loss masks.

Templates for SST-2, RTE, BoolQ, SQuAD and DROP are the exact strings of
MeZO's ``large_models/templates.py`` (Malladi et al., 2023, Appendix E.2):

* SST-2: ``"<sentence> It was {terrible|great}"``.
* RTE: ``'<premise>\\nDoes this mean that "<hypothesis>" is true? Yes or
  No?\\n{Yes|No}'`` (label 0 entailment -> Yes).
* BoolQ: ``"<passage> <Question>? {No|Yes}"`` (question capitalized, "?"
  appended if missing).
* SQuAD: ``"Title: <title>\\nContext: <context>\\nQuestion: <question>\\n
  Answer: <answer>"``; DROP: ``"Passage: <context>\\nQuestion: <question>\\n
  Answer: <answer>"`` (the first gold answer is the training target).

MeZO's OPT suite has no SST-5, TREC, QNLI, MNLI or SNLI template; these use
MeZO's RoBERTa label words (``medium_models``) in the causal style above:
SST-5 ``"<sentence> It was {terrible|bad|okay|good|great}"``; QNLI the RTE
template; MNLI/SNLI MeZO's CB template ``'Suppose <premise> Can we infer that
"<hypothesis>"? Yes, No, or Maybe?\\n{Yes|Maybe|No}'``; TREC
``"<question> Answer type: {Description|Entity|Expression|Human|Location|
Number}"``.

Tokenization follows MeZO's ``encode_prompt``: the prompt and the full
candidate text are encoded separately (with OPT's BOS), the candidate's
``option_len = len(full) - len(prompt)`` last tokens are the verbalizer /
answer tokens and carry ``loss_mask = 1``; long sequences are truncated from
the left, as MeZO does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np


@dataclasses.dataclass(frozen=True)
class Template:
  """``prompt(example)`` -> prompt text; candidate ``c`` appended as
  ``prompt + separator + verbalizer[c]``."""

  prompt: Callable[[dict], str]
  verbalizer: tuple[str, ...] = ()
  separator: str = " "

  def candidates(self, example: dict) -> list[str]:
    """Full text of each candidate (one per label)."""
    p = self.prompt(example)
    return [p + self.separator + v for v in self.verbalizer]

  def with_answer(self, example: dict, answer: str) -> str:
    return self.prompt(example) + self.separator + answer


def _boolq_prompt(ex: dict) -> str:
  q = ex["question"]
  if not q.endswith("?"):
    q = q + "?"
  q = q[0].upper() + q[1:]
  return f"{ex['passage']} {q}"


def _rte_prompt(ex: dict) -> str:
  return (
    f'{ex["premise"]}\nDoes this mean that "{ex["hypothesis"]}" is true? '
    "Yes or No?\n"
  )


def _cb_prompt(ex: dict) -> str:
  return (
    f'Suppose {ex["premise"]} Can we infer that "{ex["hypothesis"]}"? '
    "Yes, No, or Maybe?\n"
  )


TEMPLATES = {
  "sst2": Template(
    lambda e: f"{e['sentence'].strip()} It was", ("terrible", "great")
  ),
  "sst5": Template(
    lambda e: f"{e['sentence'].strip()} It was",
    ("terrible", "bad", "okay", "good", "great"),
  ),
  "rte": Template(_rte_prompt, ("Yes", "No"), separator=""),
  "qnli": Template(_rte_prompt, ("Yes", "No"), separator=""),
  "mnli": Template(_cb_prompt, ("Yes", "Maybe", "No"), separator=""),
  "snli": Template(_cb_prompt, ("Yes", "Maybe", "No"), separator=""),
  "boolq": Template(_boolq_prompt, ("No", "Yes")),
  "trec": Template(
    lambda e: f"{e['text'].strip()} Answer type:",
    ("Description", "Entity", "Expression", "Human", "Location", "Number"),
  ),
  "squad": Template(
    lambda e: (
      f"Title: {e['title']}\nContext: {e['context']}\n"
      f"Question: {e['question'].strip()}\nAnswer:"
    )
  ),
  "drop": Template(
    lambda e: (
      f"Passage: {e['context']}\nQuestion: {e['question'].strip()}\nAnswer:"
    )
  ),
}
GENERATION_TASKS = ("squad", "drop")


def encode_with_option(
  tokenizer, prompt: str, full: str, max_length: int
) -> tuple[list[int], list[int]]:
  """Token ids of ``full`` and its loss mask (1 on the last ``option_len``
  tokens), left-truncated to ``max_length``."""
  p = tokenizer.encode(prompt).ids
  ids = tokenizer.encode(full).ids
  option_len = len(ids) - len(p)
  if option_len <= 0:
    raise ValueError(f"candidate adds no tokens to the prompt: {full!r}")
  mask = [0] * (len(ids) - option_len) + [1] * option_len
  if len(ids) > max_length:
    if option_len >= max_length:
      raise ValueError(f"option of {option_len} tokens exceeds max_length")
    ids, mask = ids[-max_length:], mask[-max_length:]
  return ids, mask


def pad_batch(rows, masks, *, length: int, pad_id: int) -> dict:
  """Right-padded ``input_ids``, ``attention_mask``, ``loss_mask`` [N, length]."""
  n = len(rows)
  out = {
    "input_ids": np.full((n, length), pad_id, np.int32),
    "attention_mask": np.zeros((n, length), np.int32),
    "loss_mask": np.zeros((n, length), np.int32),
  }
  for i, (r, m) in enumerate(zip(rows, masks)):
    out["input_ids"][i, : len(r)] = r
    out["attention_mask"][i, : len(r)] = 1
    out["loss_mask"][i, : len(r)] = m
  return out


def candidate_batch(
  task: str, examples: list[dict], tokenizer, *, max_length: int, pad_id: int
) -> dict:
  """All candidates of all examples, example-major: row ``i * C + c`` is
  candidate ``c`` of example ``i`` (``C`` = number of labels)."""
  t = TEMPLATES[task]
  rows, masks = [], []
  for ex in examples:
    for full in t.candidates(ex):
      ids, m = encode_with_option(tokenizer, t.prompt(ex), full, max_length)
      rows.append(ids)
      masks.append(m)
  return pad_batch(rows, masks, length=max_length, pad_id=pad_id)


def training_batch(
  task: str, examples: list[dict], tokenizer, *, max_length: int, pad_id: int
) -> dict:
  """One row per example: the correct candidate (classification) or the
  prompt + first gold answer (generation), loss mask on its option tokens."""
  t = TEMPLATES[task]
  rows, masks = [], []
  for ex in examples:
    if task in GENERATION_TASKS:
      full = t.with_answer(ex, ex["answers"][0])
    else:
      full = t.candidates(ex)[ex["label"]]
    ids, m = encode_with_option(tokenizer, t.prompt(ex), full, max_length)
    rows.append(ids)
    masks.append(m)
  return pad_batch(rows, masks, length=max_length, pad_id=pad_id)
