"""SQuAD-official exact match and token F1 (Rajpurkar et al., 2016,
``evaluate-v1.1.py``), as MeZO uses for SQuAD and for DROP.

Normalization: lowercase, remove punctuation, remove the articles a/an/the,
collapse whitespace. EM and F1 are the maximum over the gold answers. DROP's
own metric (number-aware bag-of-spans F1) is not implemented: MeZO reports
DROP with this SQuAD-style F1, and so does this module.
"""

from __future__ import annotations

import collections
import re
import string

_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
  s = s.lower()
  s = "".join(ch for ch in s if ch not in _PUNCT)
  s = re.sub(r"\b(a|an|the)\b", " ", s)
  return " ".join(s.split())


def exact_match(prediction: str, gold: str) -> float:
  return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
  """Harmonic mean of token precision and recall after normalization."""
  p = normalize_answer(prediction).split()
  g = normalize_answer(gold).split()
  common = collections.Counter(p) & collections.Counter(g)
  same = sum(common.values())
  if same == 0:
    return 0.0
  precision, recall = same / len(p), same / len(g)
  return 2 * precision * recall / (precision + recall)


def max_over_golds(metric, prediction: str, golds: list[str]) -> float:
  return max(metric(prediction, g) for g in golds)


def squad_scores(predictions: list[str], golds: list[list[str]]) -> dict:
  """Mean EM and F1 (in [0, 1]) over examples."""
  if len(predictions) != len(golds) or not golds:
    raise ValueError("need one list of gold answers per prediction")
  em = [max_over_golds(exact_match, p, g) for p, g in zip(predictions, golds)]
  f1 = [max_over_golds(token_f1, p, g) for p, g in zip(predictions, golds)]
  return {"exact_match": sum(em) / len(em), "f1": sum(f1) / len(f1)}
