"""SuperGLUE's CB, COPA, WSC, WiC, MultiRC and ReCoRD for MeZO's suite.

Two on-disk layouts are read, row by row, into the example dicts of
:mod:`zoprivacy.data.prompts`:

* SuperGLUE's own release (``combined.zip`` or the per-task zips, as
  distributed): ``CB/``, ``COPA/``, ``WSC/``, ``WiC/``, ``MultiRC/``,
  ``ReCoRD/``, each with ``train.jsonl``, ``val.jsonl`` and ``test.jsonl``
  (no labels in ``test``). Labels are strings (CB: ``entailment``,
  ``contradiction``, ``neutral``) or booleans (WSC, WiC); WSC's spans sit in
  ``target`` (``span1_text``, ``span2_text``, ``span1_index``,
  ``span2_index``); MultiRC nests ``passage.questions[].answers[]``, each
  answer with its own ``label``; ReCoRD gives ``passage.text`` with
  ``passage.entities[]`` as character spans ``start``..``end`` (``end``
  inclusive) and ``qas[]`` with ``query`` and ``answers[]`` (``start``,
  ``end``, ``text``).
* Hugging Face ``super_glue`` exports (``to_json`` / ``to_parquet``), which
  MeZO's ``large_models/tasks.py`` reads: one row per example, integer
  labels (-1 in ``test``); MultiRC flat (``paragraph``, ``question``,
  ``answer``, ``idx`` = ``{paragraph, question, answer}``); ReCoRD flat
  (``passage``, ``query``, ``entities``, ``entity_spans``, ``answers``).

Both give the same examples: a MultiRC example is one (paragraph, question,
answer) triple, a ReCoRD example one query with its passage's entities (the
unique entity texts, in order of first appearance) as candidates and the
unique answer texts, sorted (as the Hugging Face builder sorts them), as the
gold set. Unlabelled rows are dropped. A MultiRC paragraph or a ReCoRD
passage is shared by several examples: the privacy unit of a run is the
example, as in MeZO, DP-ZO and DPZero; protecting a whole passage takes
group privacy over its examples.
"""

from __future__ import annotations

from collections.abc import Iterable

TASKS = ("cb", "copa", "wsc", "wic", "multirc", "record")
# SuperGLUE's folder of each task (and of BoolQ and RTE, read by mezo_tasks).
FOLDERS = {
  "boolq": "BoolQ",
  "cb": "CB",
  "copa": "COPA",
  "rte": "RTE",
  "wsc": "WSC",
  "wic": "WiC",
  "multirc": "MultiRC",
  "record": "ReCoRD",
}
# Hugging Face super_glue/cb's ClassLabel order (MeZO: Yes, No, Maybe).
CB_LABELS = {"entailment": 0, "contradiction": 1, "neutral": 2}


def _label(value, names: dict | None = None) -> int | None:
  """An integer label; ``None`` for an unlabelled row (absent, -1)."""
  if value is None or value == -1:
    return None
  if isinstance(value, str) and names is not None:
    if value not in names:
      raise ValueError(f"label {value!r}; expected one of {sorted(names)}")
    return names[value]
  return int(value)


def _cb(r: dict) -> dict:
  return {
    "premise": r["premise"],
    "hypothesis": r["hypothesis"],
    "label": _label(r.get("label"), CB_LABELS),
  }


def _copa(r: dict) -> dict:
  if r["question"] not in ("cause", "effect"):
    raise ValueError(f"COPA question {r['question']!r}: not cause or effect")
  keys = ("premise", "choice1", "choice2", "question")
  return {**{k: r[k] for k in keys}, "label": _label(r.get("label"))}


def _wsc(r: dict) -> dict:
  spans = r.get("target", r)  # SuperGLUE nests the spans in "target"
  return {
    "text": r["text"],
    "span1_text": spans["span1_text"],
    "span2_text": spans["span2_text"],
    "span1_index": int(spans["span1_index"]),
    "span2_index": int(spans["span2_index"]),
    "label": _label(r.get("label")),
  }


def _wic(r: dict) -> dict:
  keys = ("word", "sentence1", "sentence2")
  return {**{k: r[k] for k in keys}, "label": _label(r.get("label"))}


def _multirc(r: dict) -> list[dict]:
  """One example per answer of every question of the paragraph."""
  if not isinstance(r.get("passage"), dict):  # Hugging Face: already flat
    keys = ("paragraph", "question", "answer", "idx")
    return [{**{k: r[k] for k in keys}, "label": _label(r.get("label"))}]
  out = []
  for q in r["passage"]["questions"]:
    for a in q["answers"]:
      out.append(
        {
          "paragraph": r["passage"]["text"],
          "question": q["question"],
          "answer": a["text"],
          "idx": {
            "paragraph": r["idx"],
            "question": q["idx"],
            "answer": a["idx"],
          },
          "label": _label(a.get("label")),
        }
      )
  return out


def _unique(texts: Iterable[str]) -> list[str]:
  return list(dict.fromkeys(texts))


def _record(r: dict) -> list[dict]:
  """One example per query: the passage's entities are the candidates."""
  if not isinstance(r.get("passage"), dict):  # Hugging Face: already flat
    return [
      {
        "passage": r["passage"],
        "query": r["query"],
        "entities": _unique(r["entities"]),
        "answers": sorted(set(r.get("answers") or ())),
        "idx": r.get("idx"),
      }
    ]
  text = r["passage"]["text"]
  spans = sorted(r["passage"]["entities"], key=lambda e: e["start"])
  entities = _unique(text[e["start"] : e["end"] + 1] for e in spans)
  return [
    {
      "passage": text,
      "query": qa["query"],
      "entities": entities,
      "answers": sorted({a["text"] for a in qa.get("answers") or ()}),
      "idx": {"passage": r["idx"], "query": qa["idx"]},
    }
    for qa in r["qas"]
  ]


_PER_ROW = {"cb": _cb, "copa": _copa, "wsc": _wsc, "wic": _wic}


def normalize(task: str, rows: Iterable[dict]) -> list[dict]:
  """The labelled examples of ``task`` in ``rows`` (either layout)."""
  if task in _PER_ROW:
    examples = [_PER_ROW[task](r) for r in rows]
  elif task == "multirc":
    examples = [e for r in rows for e in _multirc(r)]
  elif task == "record":
    return [e for r in rows for e in _record(r) if e["answers"]]
  else:
    raise ValueError(f"unknown SuperGLUE task {task!r}; one of {TASKS}")
  return [e for e in examples if e["label"] is not None]
