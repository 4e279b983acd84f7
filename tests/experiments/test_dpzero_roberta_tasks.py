"""DPZero Table 2's SST-5, RTE and TREC settings with RoBERTa: LM-BFF's
CSV files, TREC's original release and GLUE's RTE TSVs read as
distributed, TREC's at-most-k-per-class sampling, and each setting's config
built with its task on tiny files and a tiny random RoBERTa (the model
code is SST-2's, whose test runs two runner steps on it)."""

import csv
import importlib

import jax
import numpy as np
import pytest
from test_tasks import NEG, POS, _tiny_hf_checkpoint

from experiments import tasks
from experiments.run import config_fields
from zoprivacy import estimator_manifest
from zoprivacy.data import prompts, splits, tokenize
from zoprivacy.data.loaders import (
  Dataset,
  MissingDataError,
  lm_bff,
  load_rte,
  mezo_tasks,
)
from zoprivacy.data.loaders.base import as_labels, text_array
from zoprivacy.data.loaders.text import LABEL_WORDS

QUESTIONS = [  # (TREC release label, question), LM-BFF class in the comment
  ("DESC:manner", "How did serfdom develop ?"),  # 0
  ("ENTY:cremat", "What films featured Popeye ?"),  # 1
  ("ABBR:exp", "What is the full form of .com ?"),  # 2
  ("HUM:ind", "Who killed Gandhi ?"),  # 3
  ("LOC:city", "What is the capital of Peru ?"),  # 4
  ("NUM:count", "How many moons has Mars ?"),  # 5
]
WORDS = (
  "bad okay good Description Entity Expression Human Location Number : "
  + " ".join(q for _, q in QUESTIONS)
).split()


@pytest.fixture(autouse=True)
def _isolated_data_root(tmp_path, monkeypatch):
  """Loaders never fall back to real copies in ~/.cache during these tests."""
  root = tmp_path / "data_root"
  root.mkdir()
  monkeypatch.setenv("ZOPRIVACY_DATA_DIR", str(root))


def _write_csv(path, rows):
  """A headerless ``label,text`` CSV as pandas' to_csv writes it."""
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w", newline="", encoding="utf-8") as f:
    csv.writer(f, lineterminator="\n").writerows(rows)


def _write_lm_bff(root, abbr=1):
  """LM-BFF's original/sst-5 and trec CSVs (TREC with ``abbr`` ABBR
  questions in train) and GLUE's RTE TSVs."""
  texts = POS + NEG
  sst5 = [(i % 5, t) for i, t in enumerate(texts)]
  for split in ("train", "test"):
    _write_csv(root / "sst-5" / f"{split}.csv", sst5)
  trec = [(lm_bff.trec_label({"label": lab}), q) for lab, q in QUESTIONS]
  train = [r for r in trec if r[0] != 2] * 3 + [trec[2]] * abbr
  _write_csv(root / "trec" / "train.csv", train)
  _write_csv(root / "trec" / "test.csv", trec)
  rows = ["index\tsentence1\tsentence2\tlabel"]
  for i in range(8):
    lab = ("entailment", "not_entailment")[i % 2]
    rows.append(f"{i}\t{POS[i % 6]} .\t{NEG[i % 6]}\t{lab}")
  (root / "RTE").mkdir()
  for split in ("train", "dev"):
    (root / "RTE" / f"{split}.tsv").write_text("\n".join(rows) + "\n")


def test_lm_bff_csv_trec_release_and_rte(tmp_path):
  _write_lm_bff(tmp_path)
  sst5 = lm_bff.load_sst5(tmp_path)
  assert sst5.train.num_classes == 5 and len(sst5.train) == 12
  # "wonderful acting , loved it" has a comma: the CSV quotes it
  assert "wonderful acting , loved it" in list(sst5.train.inputs)
  assert sst5.train.labels.tolist() == [i % 5 for i in range(12)]
  trec_csv = lm_bff.load_trec(tmp_path).test
  release = tmp_path / "release" / "trec"
  release.mkdir(parents=True)
  body = "".join(f"{lab} {q}\n" for lab, q in QUESTIONS).encode()
  body = body.replace(b"Peru", b"Pe\xf0ru")  # TREC_10's one non-UTF-8 byte
  (release / "train_5500.label").write_bytes(body)
  (release / "TREC_10.label").write_bytes(body)
  trec = lm_bff.load_trec(tmp_path / "release").test
  assert trec.labels.tolist() == trec_csv.labels.tolist() == [0, 1, 2, 3, 4, 5]
  assert trec.inputs[4] == "What is the capital of Pe ru ?"
  rte = load_rte(tmp_path)
  assert rte.train.labels.tolist() == [0, 1] * 4
  assert rte.test.inputs.shape == (8, 2)


def test_trec_labels_follow_the_verbalizer():
  """Every TREC layout maps to LM-BFF's order (Description, Entity,
  Expression, Human, Location, Number): HF's coarse_label numbers ABBR 0,
  DESC 2; the older label-coarse NUM 4, LOC 5."""
  rows = [
    {"text": "What is AIDS ?", "coarse_label": 0, "fine_label": 1},
    {"text": "How ?", "coarse_label": 2},
    {"text": "How many ?", "label-coarse": 4, "label-fine": 13},
    {"text": "Who ?", "label": "HUM:ind"},
    {"text": "Where ?", "label": 4},
    {"text": "x", "coarse_label": -1},
  ]
  got = mezo_tasks.normalize_classification("trec", rows)
  words = prompts.TEMPLATES["trec"].verbalizer
  assert [words[e["label"]] for e in got] == [
    "Expression",
    "Description",
    "Number",
    "Human",
    "Location",
  ]
  assert lm_bff.TREC_CLASSES[got[0]["label"]] == "ABBR"
  # RoBERTa's label words are the same words in the same order.
  assert [w.strip() for w in LABEL_WORDS["trec"]] == list(words)


def test_trec_sampling_takes_all_of_a_small_class():
  labels = np.array([0] * 6 + [1] * 5 + [2] * 2)
  ds = Dataset(
    text_array([f"q{i}" for i in range(13)]), as_labels(labels), 3, "t"
  )
  chosen = lm_bff.at_most_k_per_class(ds, 4, seed=1)
  assert np.bincount(labels[chosen]).tolist() == [4, 4, 2]
  full = lm_bff.at_most_k_per_class(ds, 2, seed=1)
  np.testing.assert_array_equal(full, splits.few_shot_indices(ds, 2, seed=1))
  # A neighbouring pool (one more question): at most one in and one out.
  for c in (0, 2):
    more = Dataset(
      text_array([f"q{i}" for i in range(13)] + ["new"]),
      as_labels(list(labels) + [c]),
      3,
      "t",
    )
    again = set(lm_bff.at_most_k_per_class(more, 4, seed=1).tolist())
    assert len(again - set(chosen.tolist())) <= 1
    assert len(set(chosen.tolist()) - again) <= 1


# setting -> (classes, the data file named when it is missing)
SETTINGS = {
  "sst5": (5, "sst-5/train.csv"),
  "rte": (2, "RTE/train.tsv"),
  "trec": (6, "trec/train.csv"),
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_dpzero_table2_config_builds_its_task(tmp_path, name):
  c = importlib.import_module(f"configs.dpzero_table2_roberta_{name}")
  c = c.get_config()
  assert c.dataset == name and c.estimator == "dpzero"
  assert (c.examples_per_class, c.privacy.expected_batch_size, c.num_steps) == (
    512,
    64,
    10_000,
  )
  assert c.learning_rate == 1e-6 and c.estimator_kwargs.smoothing == 1e-3
  assert (c.privacy.target_epsilon, c.privacy.delta) == (2.0, 1e-5)
  assert c.max_length == (256 if name == "rte" else 128)  # MeZO's scripts
  # The runner reads every field the config sets (the check before a run).
  config_fields.check(c, estimator_manifest.get(c.estimator).config_fields)
  classes, missing = SETTINGS[name]
  c.data_dir = str(tmp_path / "empty")
  with pytest.raises(MissingDataError) as e:
    tasks.get_task(c)
  assert any(p.endswith(missing) for p in e.value.missing), e.value.missing
  _write_lm_bff(tmp_path)
  model_dir = _tiny_hf_checkpoint(tmp_path / "roberta", True, words=WORDS)
  c.data_dir, c.model_dir = str(tmp_path), str(model_dir)
  c.examples_per_class, c.max_length, c.test_size = 2, 16, 4
  task = tasks.get_task(c)
  assert task.num_classes == classes
  # TREC: 2 of each class but ABBR, whose one training question is taken.
  assert task.num_train == (11 if name == "trec" else 2 * classes)
  ids = task.train_inputs["input_ids"]
  mask_id = tokenize.load_tokenizer(model_dir).token_to_id("<mask>")
  assert np.all((ids == mask_id).sum(1) == 1)  # one <mask> per prompt
  trainable, frozen = task.init(jax.random.key(0))
  logits = task.apply(trainable, frozen, task.test_inputs)
  assert logits.shape == (4, classes) and np.all(np.isfinite(logits))
