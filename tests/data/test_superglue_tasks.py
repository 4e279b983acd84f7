"""MeZO's SuperGLUE tasks (CB, COPA, WSC, WiC, MultiRC, ReCoRD): both
on-disk layouts (SuperGLUE's jsonl release and Hugging Face exports) read
into the same examples, MeZO's template strings, and the multiple-choice
tasks (COPA, ReCoRD) built and evaluated on a tiny random OPT."""

import functools
import json

import jax
import ml_collections
import numpy as np
import pytest
from test_mezo_tasks import _char_tokenizer, _tiny_opt_config

from experiments.tasks import TASKS, get_task, llm, llm_choice, llm_data
from zoprivacy.data import prompts
from zoprivacy.data.loaders import mezo_tasks, superglue
from zoprivacy.models.opt import OPTForCausalLM, per_example_lm_loss

# Rows as SuperGLUE's jsonl files hold them (field names and nesting of the
# release; texts shortened).
CB = [
  {
    "premise": "It was dark.",
    "hypothesis": "It was night.",
    "label": "neutral",
  },
  {"premise": "A cat sat.", "hypothesis": "A cat sat.", "label": "entailment"},
  {"premise": "P.", "hypothesis": "H.", "label": "contradiction", "idx": 2},
]
COPA = [
  {
    "premise": "My body cast a shadow over the grass.",
    "choice1": "The sun was rising.",
    "choice2": "The grass was cut.",
    "question": "cause",
    "idx": 0,
    "label": 0,
  },
  {
    "premise": "I tipped the bottle.",
    "choice1": "I ran out.",
    "choice2": "The liquid spilled.",
    "question": "effect",
    "idx": 1,
    "label": 1,
  },
]
WSC = {
  "text": "Mark told Pete many lies. He should have been truthful.",
  "target": {
    "span2_index": 5,
    "span1_index": 0,
    "span1_text": "Mark",
    "span2_text": "He",
  },
  "idx": 0,
  "label": False,
}
WIC = {
  "word": "place",
  "sentence1": "Come over to my place.",
  "sentence2": "No place for the less prominent.",
  "idx": 0,
  "label": True,
  "start1": 16,
  "start2": 3,
  "end1": 21,
  "end2": 8,
  "version": 1.1,
}
MULTIRC = {
  "idx": 7,
  "version": 1.1,
  "passage": {
    "text": "<b>Sent 1: </b>Sam ate.<br>",
    "questions": [
      {
        "question": "Who ate?",
        "idx": 0,
        "answers": [
          {"text": "Sam", "idx": 0, "label": 1},
          {"text": "Ann", "idx": 1, "label": 0},
        ],
      },
      {
        "question": "What?",
        "idx": 1,
        "answers": [{"text": "food", "idx": 2, "label": 1}],
      },
    ],
  },
}
# ReCoRD: entity spans are inclusive ("end" is the last character).
RECORD_TEXT = "Ann met Bob.\n@highlight\nBob won"
RECORD = {
  "source": "Daily mail",
  "passage": {
    "text": RECORD_TEXT,
    "entities": [
      {"start": 8, "end": 10},
      {"start": 0, "end": 2},
      {"start": 24, "end": 26},
    ],
  },
  "qas": [
    {
      "query": "@placeholder won.",
      "answers": [{"start": 24, "end": 26, "text": "Bob"}],
      "idx": 0,
    },
    {"query": "@placeholder met him.", "answers": [], "idx": 1},
  ],
  "idx": 3,
}


def _jsonl(path, rows):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("".join(json.dumps(r) + "\n" for r in rows))
  return path


def test_superglue_release_rows(tmp_path):
  cb = superglue.normalize("cb", CB + [{"premise": "p", "hypothesis": "h"}])
  assert [e["label"] for e in cb] == [2, 0, 1]  # the unlabelled row dropped
  (wsc,) = superglue.normalize("wsc", [WSC])
  assert (wsc["span1_text"], wsc["span2_text"], wsc["label"]) == (
    "Mark",
    "He",
    0,
  )
  (wic,) = superglue.normalize("wic", [WIC])
  assert wic == {
    "word": "place",
    "sentence1": "Come over to my place.",
    "sentence2": "No place for the less prominent.",
    "label": 1,
  }
  multirc = superglue.normalize("multirc", [MULTIRC])
  assert [(e["question"], e["answer"], e["label"]) for e in multirc] == [
    ("Who ate?", "Sam", 1),
    ("Who ate?", "Ann", 0),
    ("What?", "food", 1),
  ]
  assert multirc[2]["idx"] == {"paragraph": 7, "question": 1, "answer": 2}
  (record,) = superglue.normalize("record", [RECORD])  # unanswered: dropped
  assert record["entities"] == ["Ann", "Bob"]  # unique, by first position
  assert record["answers"] == ["Bob"] and record["passage"] == RECORD_TEXT
  with pytest.raises(ValueError, match="neutral"):
    superglue.normalize("cb", [{**CB[0], "label": "maybe"}])


def test_hugging_face_exports_read_the_same(tmp_path):
  """super_glue's flat rows (integer labels, -1 in test) give the same
  examples as the release's nested ones."""
  hf_multirc = [
    {
      "paragraph": e["paragraph"],
      "question": e["question"],
      "answer": e["answer"],
      "idx": e["idx"],
      "label": e["label"],
    }
    for e in superglue.normalize("multirc", [MULTIRC])
  ]
  hf_multirc.append({**hf_multirc[0], "label": -1})
  assert superglue.normalize("multirc", hf_multirc) == superglue.normalize(
    "multirc", [MULTIRC]
  )
  hf_record = {
    "passage": RECORD_TEXT,
    "query": "@placeholder won.",
    "entities": ["Bob", "Ann", "Bob"],
    "entity_spans": {"text": ["Ann", "Bob"], "start": [0, 8], "end": [2, 10]},
    "answers": ["Bob"],
    "idx": {"passage": 3, "query": 0},
  }
  (rec,) = superglue.normalize("record", [hf_record])
  assert rec["entities"] == ["Bob", "Ann"] and rec["answers"] == ["Bob"]
  hf_wsc = {k: v for k, v in WSC.items() if k != "target"}
  hf_wsc.update(WSC["target"], label=0)
  assert superglue.normalize("wsc", [hf_wsc]) == superglue.normalize(
    "wsc", [WSC]
  )
  hf_cb = [{**r, "label": superglue.CB_LABELS[r["label"]]} for r in CB]
  assert superglue.normalize("cb", hf_cb) == superglue.normalize("cb", CB)


def test_superglue_folders_are_found(tmp_path):
  """SuperGLUE's CB/{train,val}.jsonl is read where no HF export is."""
  _jsonl(tmp_path / "CB" / "train.jsonl", CB)
  _jsonl(tmp_path / "CB" / "val.jsonl", CB[:2])
  _jsonl(tmp_path / "CB" / "test.jsonl", [{"premise": "p", "hypothesis": "h"}])
  files, missing = llm_data.data_files(tmp_path, "cb")
  assert missing == [] and [f.name for f in files] == [
    "train.jsonl",
    "val.jsonl",
  ]
  train, val = llm_data.read_data(files, "cb")
  assert len(train) == 3 and len(val) == 2
  files, missing = llm_data.data_files(tmp_path, "wic")
  assert [str(m) for m in missing] == [
    str(tmp_path / "wic" / "train.jsonl"),
    str(tmp_path / "wic" / "validation.jsonl"),
  ]


def test_template_strings():
  t = prompts.TEMPLATES
  cb = superglue.normalize("cb", CB)[0]
  assert t["cb"].candidates(cb)[2] == (
    'Suppose It was dark. Can we infer that "It was night."? Yes, No, or '
    "Maybe?\nMaybe"
  )
  wsc = superglue.normalize("wsc", [WSC])[0]
  assert t["wsc"].candidates(wsc)[1] == (
    f"{WSC['text']}\nIn the previous sentence, does the pronoun \"he\" refer "
    "to Mark? Yes or No?\nYes"
  )
  wic = superglue.normalize("wic", [WIC])[0]
  assert t["wic"].candidates(wic)[0] == (
    'Does the word "place" have the same meaning in these two sentences? '
    "Yes, No?\nCome over to my place.\nNo place for the less prominent.\nNo"
  )
  mrc = superglue.normalize("multirc", [MULTIRC])[0]
  assert t["multirc"].candidates(mrc)[1] == (
    "<b>Sent 1: </b>Sam ate.<br>\nQuestion: Who ate?\nI found this answer "
    '"Sam". Is that correct? Yes or No?\nYes'
  )
  copa = superglue.normalize("copa", COPA)
  assert t["copa"].candidates(copa[0]) == [
    "My body cast a shadow over the grass because the sun was rising.",
    "My body cast a shadow over the grass because the grass was cut.",
  ]
  assert t["copa"].prompt(copa[1]) == "I tipped the bottle so"
  assert t["copa"].candidates(copa[1])[0] == "I tipped the bottle so I ran out."
  rec = superglue.normalize("record", [RECORD])[0]
  assert t["record"].candidates(rec) == [
    "Ann met Bob.\n- Bob won\n- Ann won.",
    "Ann met Bob.\n- Bob won\n- Bob won.",
  ]
  assert prompts.gold_candidates("record", rec) == {1}
  assert prompts.training_text("record", rec) == t["record"].candidates(rec)[1]
  assert prompts.training_text("copa", copa[1]).endswith(
    "so the liquid spilled."
  )


def _tiny_causal_lm(tmp_path, monkeypatch, positions=96):
  """A 1-layer random OPT and a byte tokenizer, as the task loads them."""
  tok, vocab_size = _char_tokenizer(tmp_path)
  cfg = _tiny_opt_config(vocab_size, layers=1, positions=positions)
  model = OPTForCausalLM(cfg)
  params = model.init(jax.random.key(3), np.ones((1, 4), np.int32))["params"]
  monkeypatch.setattr(
    llm, "_causal_lm", lambda c: (OPTForCausalLM, cfg, params, tok)
  )
  monkeypatch.setattr(  # the model above is built here, not read from files
    llm.llm_files, "missing_model_files", lambda c: ("", [], "")
  )
  return model, params, tok


def _record_rows(n):
  rows = []
  for i in range(n):
    names = ["Ann", "Bob", "Cy"][: 2 + i % 2]
    text = f"{' '.join(names)} {i}.\n@highlight\n{names[-1]} won"
    starts = [text.index(x) for x in names]
    rows.append(
      {
        "passage": {
          "text": text,
          "entities": [
            {"start": s, "end": s + len(x) - 1} for s, x in zip(starts, names)
          ],
        },
        "qas": [
          {
            "query": "@placeholder won.",
            "answers": [
              {"start": starts[i % 2], "end": 0, "text": names[i % 2]}
            ],
            "idx": 0,
          }
        ],
        "idx": i,
      }
    )
  return rows


@pytest.mark.parametrize("task", ["record", "copa"])
def test_multiple_choice_task_on_tiny_opt(tmp_path, monkeypatch, task):
  model, params, tok = _tiny_causal_lm(tmp_path, monkeypatch)
  rows = _record_rows(5) if task == "record" else COPA * 3
  for split in ("train", "val"):
    _jsonl(tmp_path / superglue.FOLDERS[task] / f"{split}.jsonl", rows)
  config = ml_collections.ConfigDict(
    {
      "dataset": f"{task}_opt",
      "data_dir": str(tmp_path),
      "max_length": 96,
      "num_train": 4,
      "eval_batch_size": 3,
    }
  )
  built = get_task(config)
  assert built.num_train == 4 and built.metric_names == ("test_accuracy",)
  test = mezo_tasks.sample_examples(
    superglue.normalize(task, rows), 1000, seed=1
  )
  kw = dict(max_length=96, pad_id=1)
  trainable, frozen = built.init(jax.random.key(0))
  # Training: the teacher-forced loss of the gold candidate's tokens (the
  # task's answer window gives the loss over the whole sequence).
  reference = jax.jit(functools.partial(per_example_lm_loss, model=model))
  gold = prompts.training_batch(task, test, tok, **kw)
  loss = jax.jit(built.batched_loss)(
    trainable, frozen, (built.test_inputs, built.test_labels)
  )
  np.testing.assert_allclose(loss, reference(params, gold), rtol=1e-5)
  # Evaluation: the argmax of every candidate's score, 3 rows at a time.
  cand, owners = llm_choice.encode_candidates(task, test, tok, **kw)
  assert len(owners) == sum(
    len(prompts.TEMPLATES[task].candidates(e)) for e in test
  )
  scores = -np.asarray(reference(params, cand))
  golds = [prompts.gold_candidates(task, e) for e in test]
  expected = np.mean(
    [int(np.argmax(scores[owners == i])) in g for i, g in enumerate(golds)]
  )
  got = built.evaluate(trainable, frozen)
  assert got == {"test_accuracy": pytest.approx(expected)}
  # Its chance rate (experiments.run.chance): COPA's two choices, ReCoRD's
  # 2 or 3 entities with one answer each.
  rate, _ = built.chance_accuracy
  uniform = np.mean(
    [
      len(g) / len(prompts.TEMPLATES[task].candidates(e))
      for g, e in zip(golds, test)
    ]
  )
  first = np.mean([0 in g for g in golds])
  assert rate == pytest.approx(max(uniform, first)) and 0.3 < rate < 0.7


def test_registered_and_refused_where_meaningless(tmp_path):
  for name in superglue.TASKS:
    assert f"{name}_opt" in TASKS
  config = ml_collections.ConfigDict(
    {
      "dataset": "record_opt",
      "data_dir": str(tmp_path),
      "examples_per_class": 16,
    }
  )
  with pytest.raises(ValueError, match="num_train"):
    get_task(config)
  assert llm_choice.choice_accuracy(
    [0.1, 0.3, 0.2], [0, 0, 2], [{1}, {0}, {0}]
  ) == pytest.approx(2 / 3)
