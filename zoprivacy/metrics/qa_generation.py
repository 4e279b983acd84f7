"""Greedy-decoding evaluation of the generation tasks (SQuAD, DROP), as MeZO
does it (``large_models/run.py``): greedy decoding of at most
``max_new_tokens`` = 50 tokens, stopping at a newline or ``</s>``; the
decoded continuation (special tokens skipped, cut at the first newline,
stripped) is scored with SQuAD-official EM / F1 against all gold answers.
"""

from __future__ import annotations

import numpy as np

from zoprivacy.data import prompts
from zoprivacy.metrics import qa
from zoprivacy.models.opt_generate import generate


def prompt_batch(
  task: str, examples: list[dict], tokenizer, *, max_length: int, pad_id: int
) -> dict:
  """Left-padded prompts ``[N, max_length]`` (left-truncated if longer)."""
  t = prompts.TEMPLATES[task]
  n = len(examples)
  ids = np.full((n, max_length), pad_id, np.int32)
  mask = np.zeros((n, max_length), np.int32)
  for i, ex in enumerate(examples):
    row = tokenizer.encode(t.prompt(ex)).ids[-max_length:]
    ids[i, max_length - len(row) :] = row
    mask[i, max_length - len(row) :] = 1
  return {"input_ids": ids, "attention_mask": mask}


def answer_text(tokenizer, token_ids) -> str:
  """Decoded continuation, cut at the first newline (MeZO's stop token)."""
  text = tokenizer.decode([int(t) for t in token_ids], skip_special_tokens=True)
  return text.split("\n")[0].strip()


def evaluate_generation(
  params,
  task: str,
  examples: list[dict],
  tokenizer,
  *,
  model,
  prompt_length: int,
  max_new_tokens: int = 50,
  batch_size: int = 8,
  pad_id: int | None = None,
) -> dict:
  """Mean EM and F1 (in [0, 1]) of greedy answers, plus the predictions.

  ``pad_id``: the padding token (default: the model config's; Llama and
  Mistral have none, so pass the tokenizer's). Every batch has
  ``batch_size`` rows (the last one is filled with copies of its first
  prompt, whose answers are dropped): one compilation of the decoder.
  """
  pad_id = model.config.pad_token_id if pad_id is None else pad_id
  batch = prompt_batch(
    task, examples, tokenizer, max_length=prompt_length, pad_id=pad_id
  )
  preds = []
  for s in range(0, len(examples), batch_size):
    rows = np.arange(s, s + batch_size)
    rows = np.where(rows < len(examples), rows, s)
    out = generate(
      params,
      batch["input_ids"][rows],
      batch["attention_mask"][rows],
      max_new_tokens,
      model=model,
      pad_token_id=pad_id,
    )
    real = min(batch_size, len(examples) - s)
    preds += [answer_text(tokenizer, row) for row in np.asarray(out)[:real]]
  scores = qa.squad_scores(preds, [e["answers"] for e in examples])
  return {**scores, "predictions": preds}
