"""Readers for the MeZO / DP-ZO / DPZero causal-LM task suite.

Every reader returns a list of example dicts (field names as in the Hugging
Face ``datasets`` releases, which MeZO's ``large_models/tasks.py`` reads):

* SST-2 / SST-5: ``sentence``, ``label`` (SST-5: ``text``, ``label`` 0..4 in
  ``SetFit/sst5``; both accepted).
* RTE / QNLI / MNLI / SNLI: ``premise``, ``hypothesis``, ``label``
  (RTE/QNLI: 0 entailment, 1 not_entailment; MNLI/SNLI: 0/1/2 entailment,
  neutral, contradiction). GLUE TSVs (``sentence1``/``sentence2``,
  ``question``/``sentence``) are mapped to these names.
* BoolQ: ``passage``, ``question``, ``label`` (1 = true; SuperGLUE JSONL).
* TREC: ``text``, ``label`` (coarse label, 0..5 in LM-BFF's order, the
  verbalizer's: :func:`zoprivacy.data.loaders.lm_bff.trec_label` maps the
  Hugging Face exports' ``coarse_label`` / ``label-coarse`` numbering).
* SQuAD v1.1: ``title``, ``context``, ``question``, ``answers`` (list of
  strings, duplicates kept as in the official file).
* DROP: ``context``, ``question``, ``answers`` (each answer rendered as one
  string: the number, the spans joined by ", ", or the date "day month year").

Formats: JSON lines, the original releases (GLUE TSV, SQuAD JSON, DROP JSON),
and parquet (as written by ``datasets.Dataset.to_parquet`` or the hub's
``refs/convert/parquet`` files), which needs ``pyarrow``.

Sampling (:func:`sample_examples`, :func:`sample_per_class`) follows MeZO's
sizes: ``n`` examples (MeZO: 1000 train, 500 dev, 1000 eval), or ``k``
examples per class (few-shot), chosen by a public seed. The rule is
neighbour-stable (:mod:`zoprivacy.data.stable_split`): the ``n`` (or ``k``
per class) examples of smallest keyed hash of the example itself, so adding
or removing one example of the pool changes the selection by at most one
example in and one out.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from zoprivacy.data import stable_split
from zoprivacy.data.loaders import lm_bff
from zoprivacy.data.loaders.glue import read_tsv

NLI3 = {"entailment": 0, "neutral": 1, "contradiction": 2}
NLI2 = {"entailment": 0, "not_entailment": 1}


def read_jsonl(path) -> list[dict]:
  """One JSON object per non-empty line."""
  rows = []
  with open(path, encoding="utf-8") as f:
    for lineno, line in enumerate(f, 1):
      if line.strip():
        try:
          rows.append(json.loads(line))
        except json.JSONDecodeError as e:
          raise ValueError(f"{path}:{lineno}: invalid JSON: {e}") from e
  return rows


def read_parquet(path) -> list[dict]:
  """Rows of a parquet file as dicts (requires ``pyarrow``)."""
  try:
    import pyarrow.parquet as pq
  except ImportError as e:
    raise ImportError(
      f"reading {path} needs pyarrow (pip install pyarrow); or export the "
      "dataset as JSON lines (datasets' to_json) instead"
    ) from e
  return pq.read_table(str(path)).to_pylist()


def read_records(path) -> list[dict]:
  """``.parquet``, ``.jsonl``/``.json`` (JSON lines) or ``.tsv`` by suffix."""
  path = Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"{path}: no such file")
  if path.suffix == ".parquet":
    return read_parquet(path)
  if path.suffix in (".jsonl", ".json"):
    return read_jsonl(path)
  if path.suffix == ".tsv":
    header, rows = read_tsv(path)
    return [dict(zip(header, r)) for r in rows]
  raise ValueError(f"{path}: unknown format (parquet, jsonl, json, tsv)")


def _label(value, names: dict | None) -> int:
  if isinstance(value, str) and names is not None and value in names:
    return names[value]
  return int(value)


def normalize_classification(task: str, rows: list[dict]) -> list[dict]:
  """Maps HF / GLUE / SuperGLUE column names to this module's field names;
  drops unlabelled rows (GLUE test files, SNLI ``-``, HF label -1)."""
  out = []
  for r in rows:
    if task in ("sst2", "sst5"):
      text = r.get("sentence", r.get("text"))
      ex = {"sentence": str(text).strip(), "raw_label": r.get("label")}
    elif task in ("rte", "qnli", "mnli", "snli"):
      if "premise" in r:
        p, h = r["premise"], r["hypothesis"]
      elif "question" in r:  # QNLI: question, sentence
        p, h = r["sentence"], r["question"]
      else:
        p, h = r["sentence1"], r["sentence2"]
      lab = r.get("label", r.get("gold_label"))
      ex = {"premise": p, "hypothesis": h, "raw_label": lab}
    elif task == "boolq":
      lab = r.get("label", r.get("answer"))
      ex = {
        "passage": r["passage"],
        "question": r["question"],
        "raw_label": lab,
      }
    elif task == "trec":  # LM-BFF's class order, whatever the export's
      ex = {"text": r["text"], "raw_label": lm_bff.trec_label(r)}
    else:
      raise ValueError(f"unknown classification task {task!r}")
    raw = ex.pop("raw_label")
    if raw is None or raw in ("-", "", -1):
      continue
    names = NLI3 if task in ("mnli", "snli") else NLI2
    if isinstance(raw, bool):
      ex["label"] = int(raw)
    elif task == "boolq" and isinstance(raw, str):
      ex["label"] = int(raw.lower() == "true")
    else:
      ex["label"] = _label(raw, names)
    out.append(ex)
  return out


def load_squad_json(path) -> list[dict]:
  """SQuAD v1.1 JSON (``data[].paragraphs[].qas[].answers[].text``)."""
  with open(path, encoding="utf-8") as f:
    data = json.load(f)["data"]
  out = []
  for article in data:
    for par in article["paragraphs"]:
      for qa in par["qas"]:
        out.append(
          {
            "id": qa["id"],
            "title": article.get("title", ""),
            "context": par["context"],
            "question": qa["question"],
            "answers": [a["text"] for a in qa["answers"]],
          }
        )
  return out


def squad_from_hf(rows: list[dict]) -> list[dict]:
  """HF ``squad`` rows (``answers = {"text": [...], "answer_start": [...]}``)."""
  return [
    {
      "id": r["id"],
      "title": r["title"],
      "context": r["context"],
      "question": r["question"],
      "answers": list(r["answers"]["text"]),
    }
    for r in rows
  ]


def drop_answer_text(answer: dict) -> str:
  """One DROP answer dict (number / spans / date) as a string."""
  if answer.get("number"):
    return str(answer["number"])
  if answer.get("spans"):
    return ", ".join(answer["spans"])
  date = answer.get("date") or {}
  parts = [date.get(k, "") for k in ("day", "month", "year")]
  return " ".join(p for p in parts if p)


def load_drop_json(path) -> list[dict]:
  """DROP JSON: ``{pid: {passage, qa_pairs: [{query_id, question, answer,
  validated_answers?}]}}``; gold answers = answer + validated answers."""
  with open(path, encoding="utf-8") as f:
    data = json.load(f)
  out = []
  for item in data.values():
    for qa in item["qa_pairs"]:
      answers = [drop_answer_text(qa["answer"])]
      answers += [drop_answer_text(a) for a in qa.get("validated_answers", [])]
      out.append(
        {
          "id": qa["query_id"],
          "context": item["passage"],
          "question": qa["question"],
          "answers": [a for a in answers if a],
        }
      )
  return out


def drop_from_hf(rows: list[dict]) -> list[dict]:
  """HF ``ucinlp/drop`` rows (``answers_spans = {"spans": [...]}``), as
  MeZO reads them."""
  return [
    {
      "id": r["query_id"],
      "context": r["passage"],
      "question": r["question"],
      "answers": list(r["answers_spans"]["spans"]),
    }
    for r in rows
  ]


def sample_examples(examples: list, n: int, *, seed: int) -> list:
  """``n`` examples (all if fewer), in file order: those of smallest keyed
  hash (public ``seed``). From a private pool the selection is the private
  training set; two neighbouring pools' selections differ by at most one
  example in and one out (a group of two for the pool)."""
  if n >= len(examples):
    return list(examples)
  u = stable_split.record_uniforms(examples, seed=seed, purpose="examples")
  return [examples[i] for i in stable_split.lowest(u, n)]


def sample_per_class(examples: list[dict], k: int, *, seed: int) -> list[dict]:
  """``k`` examples of each label (few-shot, as in MeZO's k=16/512 runs),
  in file order: those of smallest keyed hash per label (public ``seed``;
  the guarantee of :func:`sample_examples`); raises if a class has fewer
  than ``k``."""
  u = stable_split.record_uniforms(examples, seed=seed, purpose="few-shot")
  labels = np.array([e["label"] for e in examples])
  return [examples[i] for i in stable_split.lowest(u, k, labels)]
