"""The evaluation of the multiple-choice causal-LM tasks (COPA, ReCoRD).

Each test example has its own candidates (COPA's two choices, ReCoRD's
passage entities, from one to dozens): their sequences are encoded once,
flattened into ``[R, S]`` rows with each row's example (``owners``), and
scored ``rows`` at a time by minus the mean NLL of the candidate's tokens
(one compiled shape; the last chunk is padded with copies of its first
row, whose scores are dropped). An example's prediction is its
best-scoring candidate (the first on a tie), correct when it is among the
example's gold candidates (:func:`zoprivacy.data.prompts.gold_candidates`:
for ReCoRD any of the answers, as MeZO counts it); an example without
candidates counts as wrong.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np

from zoprivacy.data import prompts


def encode_candidates(
  task: str, examples: list[dict], tokenizer, *, max_length: int, pad_id: int
) -> tuple[dict, np.ndarray]:
  """``(rows, owners)``: every candidate of every example as ``[R, S]``
  ``input_ids`` / ``attention_mask`` / ``loss_mask``, and the example of
  each row ``[R]``."""
  template = prompts.TEMPLATES[task]
  counts = [len(template.candidates(e)) for e in examples]
  rows = prompts.candidate_batch(
    task, examples, tokenizer, max_length=max_length, pad_id=pad_id
  )
  owners = np.repeat(np.arange(len(examples)), counts)
  return rows, owners


def choice_accuracy(scores, owners, golds: list[set[int]]) -> float:
  """The fraction of examples whose best-scoring candidate is gold."""
  scores, owners = np.asarray(scores), np.asarray(owners)
  starts = np.searchsorted(owners, np.arange(len(golds)))
  ends = np.searchsorted(owners, np.arange(len(golds)), side="right")
  correct = sum(
    int(e > s and int(np.argmax(scores[s:e])) in g)
    for s, e, g in zip(starts, ends, golds)
  )
  return correct / len(golds)


def chance_accuracy(task: str, examples: list[dict]) -> tuple[float, str]:
  """``(rate, what it is)``: the larger of a uniform guess's expected
  accuracy and always taking the first candidate's (a model whose scores
  are all equal), over ``examples`` (:mod:`experiments.run.chance`)."""
  template = prompts.TEMPLATES[task]
  counts = [len(template.candidates(e)) for e in examples]
  golds = [prompts.gold_candidates(task, e) for e in examples]
  n = max(len(examples), 1)
  uniform = sum(len(g) / c for g, c in zip(golds, counts) if c) / n
  first = sum(1 for g, c in zip(golds, counts) if c and 0 in g) / n
  if first > uniform:
    return first, f"always the first candidate ({uniform:.4f} by a guess)"
  return uniform, (
    f"a uniform guess among each example's candidates (always the first: "
    f"{first:.4f})"
  )


def _chunks(batch: dict, size: int):
  """``(chunk, n)``: ``size`` rows at a time, the last padded with its
  first row; ``n`` of them are real."""
  total = len(batch["input_ids"])
  for start in range(0, total, size):
    chunk = {k: v[start : start + size] for k, v in batch.items()}
    n = len(chunk["input_ids"])
    if n < size:
      chunk = {
        k: np.concatenate([v, np.repeat(v[:1], size - n, axis=0)])
        for k, v in chunk.items()
      }
    yield chunk, n


def choice_evaluate(
  score: Callable, task: str, examples: list[dict], rows: dict, owners, size
) -> Callable:
  """``(trainable, frozen) -> {"test_accuracy": ...}`` over ``examples``;
  ``score(trainable, frozen, chunk) -> [size]`` scores of ``size`` rows."""
  golds = [prompts.gold_candidates(task, e) for e in examples]
  size = max(1, min(int(size), len(owners) or 1))
  compiled = jax.jit(score)

  def evaluate(trainable, frozen):
    scores = [
      np.asarray(compiled(trainable, frozen, chunk))[:n]
      for chunk, n in _chunks(rows, size)
    ]
    flat = np.concatenate(scores) if scores else np.zeros(0)
    return {"test_accuracy": choice_accuracy(flat, owners, golds)}

  return evaluate
