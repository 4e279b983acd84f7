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

SuperGLUE's other tasks take MeZO's ``large_models`` templates (each task's
``template_version`` 0, the one ``tasks.py`` uses):

* CB (``CBTemplate``): ``'Suppose <premise> Can we infer that
  "<hypothesis>"? Yes, No, or Maybe?\\n{Yes|No|Maybe}'`` (labels entailment,
  contradiction, neutral).
* WSC (``WSCTemplate``): ``'<text>\\nIn the previous sentence, does the
  pronoun "<span2 lower-cased>" refer to <span1>? Yes or No?\\n{No|Yes}'``.
* WiC (``WICTemplate``): ``'Does the word "<word>" have the same meaning in
  these two sentences? Yes, No?\\n<sentence1>\\n<sentence2>\\n{No|Yes}'``.
* MultiRC (``MultiRCTemplate``): ``'<paragraph>\\nQuestion: <question>\\nI
  found this answer "<answer>". Is that correct? Yes or No?\\n{No|Yes}'``.
* COPA (``CopaTemplate``, capitalization "correct"): the premise without
  its final period, then ``" so"`` (effect) or ``" because"`` (cause); each
  choice is a candidate, its first word lower-cased unless it is "I".
* ReCoRD (``ReCoRDTemplateGPT3``): the passage with ``"@highlight\\n"``
  replaced by ``"- "``, then ``"\\n-"``; each candidate is the query with
  ``@placeholder`` replaced by one of the passage's entities.

COPA and ReCoRD are multiple choice (:data:`CHOICE_TASKS`): their candidates
come from the example, and MeZO trains them on the teacher-forced loss of
the gold candidate (``--train_as_classification False`` in its
``mezo.sh``); ReCoRD's gold set is every answer, its training target the
first.

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
  ``prompt + separator + verbalizer[c]``, or, for a multiple-choice task,
  ``prompt + separator + options(example)[c]``."""

  prompt: Callable[[dict], str]
  verbalizer: tuple[str, ...] = ()
  separator: str = " "
  options: Callable[[dict], list[str]] | None = None

  def candidates(self, example: dict) -> list[str]:
    """Full text of each candidate (one per label, or per option)."""
    p = self.prompt(example)
    words = self.verbalizer if self.options is None else self.options(example)
    return [p + self.separator + v for v in words]

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


def _wsc_prompt(ex: dict) -> str:
  return (
    f'{ex["text"]}\nIn the previous sentence, does the pronoun '
    f'"{ex["span2_text"].lower()}" refer to {ex["span1_text"]}? Yes or No?\n'
  )


def _wic_prompt(ex: dict) -> str:
  return (
    f'Does the word "{ex["word"]}" have the same meaning in these two '
    f"sentences? Yes, No?\n{ex['sentence1']}\n{ex['sentence2']}\n"
  )


def _multirc_prompt(ex: dict) -> str:
  return (
    f"{ex['paragraph']}\nQuestion: {ex['question']}\nI found this answer "
    f'"{ex["answer"]}". Is that correct? Yes or No?\n'
  )


def _copa_prompt(ex: dict) -> str:
  premise = ex["premise"].rstrip()
  if premise.endswith("."):
    premise = premise[:-1]
  conjunction = {"effect": " so", "cause": " because"}[ex["question"]]
  return (premise + conjunction).strip(" ")


def _copa_choice(choice: str) -> str:
  """CopaTemplate's "correct" capitalization: the first word lower-cased
  unless it is "I"."""
  words = choice.rstrip(" ").split(" ")
  if words[0] != "I":
    words[0] = words[0].lower()
  return " ".join(words)


def _record_prompt(ex: dict) -> str:
  return ex["passage"].replace("@highlight\n", "- ") + "\n-"


def record_option(ex: dict, entity: str) -> str:
  """ReCoRD's candidate text for ``entity``: the query, filled in."""
  return ex["query"].replace("@placeholder", entity).rstrip(" ")


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
  "cb": Template(_cb_prompt, ("Yes", "No", "Maybe"), separator=""),
  "wsc": Template(_wsc_prompt, ("No", "Yes"), separator=""),
  "wic": Template(_wic_prompt, ("No", "Yes"), separator=""),
  "multirc": Template(_multirc_prompt, ("No", "Yes"), separator=""),
  "copa": Template(
    _copa_prompt,
    options=lambda e: [_copa_choice(e["choice1"]), _copa_choice(e["choice2"])],
  ),
  "record": Template(
    _record_prompt,
    options=lambda e: [record_option(e, x) for x in e["entities"]],
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
CHOICE_TASKS = ("copa", "record")


def gold_candidates(task: str, example: dict) -> set[int]:
  """The indices of ``example``'s correct candidates: its label, or for
  ReCoRD every entity among its answers (MeZO counts any as correct)."""
  if task == "record":
    answers = set(example["answers"])
    return {i for i, e in enumerate(example["entities"]) if e in answers}
  return {int(example["label"])}


def training_text(task: str, example: dict) -> str:
  """The sequence a training step scores: the correct candidate, the
  prompt + first gold answer (generation), or ReCoRD's query filled with
  the first answer."""
  t = TEMPLATES[task]
  if task in GENERATION_TASKS:
    return t.with_answer(example, example["answers"][0])
  if task == "record":
    return t.with_answer(example, record_option(example, example["answers"][0]))
  return t.candidates(example)[example["label"]]


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
    full = training_text(task, ex)
    ids, m = encode_with_option(tokenizer, t.prompt(ex), full, max_length)
    rows.append(ids)
    masks.append(m)
  return pad_batch(rows, masks, length=max_length, pad_id=pad_id)
