"""MeZO causal-LM task suite: upstream file formats, few-shot sampling,
template strings, verbalizer/answer loss masks, SQuAD EM/F1 and greedy
generation on a tiny random OPT."""

import json

import jax
import numpy as np
import pytest

from experiments.tasks import TASKS, get_task, llm
from zoprivacy.data import prompts
from zoprivacy.data.loaders import MissingDataError, mezo_tasks
from zoprivacy.metrics import qa, qa_generation
from zoprivacy.models.hf_checkpoint import load_bpe_tokenizer
from zoprivacy.models.opt import OPTConfig, OPTForCausalLM, per_example_lm_loss

SQUAD = {
  "version": "1.1",
  "data": [
    {
      "title": "Super_Bowl_50",
      "paragraphs": [
        {
          "context": "The Denver Broncos defeated the Carolina Panthers.",
          "qas": [
            {
              "id": "q1",
              "question": "Who won Super Bowl 50?",
              "answers": [
                {"answer_start": 4, "text": "Denver Broncos"},
                {"answer_start": 4, "text": "Denver Broncos"},
                {"answer_start": 11, "text": "Broncos"},
              ],
            }
          ],
        }
      ],
    }
  ],
}
DROP = {
  "nfl_1": {
    "passage": "The Bears scored 7 points on 3 March 2010.",
    "qa_pairs": [
      {
        "query_id": "d1",
        "question": "How many points?",
        "answer": {"number": "7", "spans": [], "date": {}},
        "validated_answers": [
          {"number": "", "spans": ["seven"], "date": {}},
        ],
      },
      {
        "query_id": "d2",
        "question": "Which teams?",
        "answer": {"number": "", "spans": ["Bears", "Lions"], "date": {}},
      },
      {
        "query_id": "d3",
        "question": "When?",
        "answer": {
          "number": "",
          "spans": [],
          "date": {"day": "3", "month": "March", "year": "2010"},
        },
      },
    ],
  }
}


def _tiny_opt_config(vocab_size, *, layers, positions):
  """A 16-wide OPT small enough to run in a test."""
  return OPTConfig(
    vocab_size=vocab_size,
    hidden_size=16,
    num_hidden_layers=layers,
    ffn_dim=32,
    num_attention_heads=4,
    max_position_embeddings=positions,
  )


def test_squad_and_drop_original_json(tmp_path):
  (tmp_path / "dev-v1.1.json").write_text(json.dumps(SQUAD))
  (tmp_path / "drop_dataset_dev.json").write_text(json.dumps(DROP))
  (s,) = mezo_tasks.load_squad_json(tmp_path / "dev-v1.1.json")
  assert s["title"] == "Super_Bowl_50" and s["id"] == "q1"
  assert s["answers"] == ["Denver Broncos", "Denver Broncos", "Broncos"]
  d = mezo_tasks.load_drop_json(tmp_path / "drop_dataset_dev.json")
  assert [e["answers"] for e in d] == [
    ["7", "seven"],
    ["Bears, Lions"],
    ["3 March 2010"],
  ]
  hf = mezo_tasks.squad_from_hf(
    [
      dict(
        id="q1",
        title="T",
        context="c",
        question="q",
        answers={"text": ["a", "b"], "answer_start": [0, 1]},
      )
    ]
  )
  assert hf[0]["answers"] == ["a", "b"]


def test_glue_tsv_boolq_jsonl_trec(tmp_path):
  (tmp_path / "train.tsv").write_text(
    "sentence\tlabel\na great movie \t1\nawful\t0\n"
  )
  sst2 = mezo_tasks.normalize_classification(
    "sst2", mezo_tasks.read_records(tmp_path / "train.tsv")
  )
  assert sst2 == [
    {"sentence": "a great movie", "label": 1},
    {"sentence": "awful", "label": 0},
  ]
  (tmp_path / "rte.tsv").write_text(
    "index\tsentence1\tsentence2\tlabel\n"
    "0\tA dog runs.\tAn animal moves.\tentailment\n"
    "1\tA cat.\tA car.\tnot_entailment\n"
  )
  rte = mezo_tasks.normalize_classification(
    "rte", mezo_tasks.read_records(tmp_path / "rte.tsv")
  )
  assert [e["label"] for e in rte] == [0, 1]
  assert rte[0]["premise"] == "A dog runs."
  (tmp_path / "mnli.tsv").write_text(
    "index\tsentence1\tsentence2\tgold_label\n"
    "0\tp\th\tcontradiction\n1\tp\th\t-\n"
  )
  mnli = mezo_tasks.normalize_classification(
    "mnli", mezo_tasks.read_records(tmp_path / "mnli.tsv")
  )
  assert mnli == [{"premise": "p", "hypothesis": "h", "label": 2}]
  (tmp_path / "qnli.tsv").write_text(
    "index\tquestion\tsentence\tlabel\n0\tWho?\tHim.\tentailment\n"
  )
  qnli = mezo_tasks.normalize_classification(
    "qnli", mezo_tasks.read_records(tmp_path / "qnli.tsv")
  )
  assert qnli == [{"premise": "Him.", "hypothesis": "Who?", "label": 0}]
  rows = [
    {"question": "is it", "passage": "P.", "idx": 0, "label": True},
    {"question": "is not", "passage": "Q.", "idx": 1, "label": False},
  ]
  (tmp_path / "val.jsonl").write_text("\n".join(map(json.dumps, rows)))
  boolq = mezo_tasks.normalize_classification(
    "boolq", mezo_tasks.read_records(tmp_path / "val.jsonl")
  )
  assert [e["label"] for e in boolq] == [1, 0]
  trec = mezo_tasks.normalize_classification(
    "trec", [{"text": "Who is he ?", "coarse_label": 3, "fine_label": 20}]
  )
  assert trec == [{"text": "Who is he ?", "label": 3}]
  sst5 = mezo_tasks.normalize_classification(
    "sst5", [{"text": "ok", "label": 2, "label_text": "neutral"}]
  )
  assert sst5 == [{"sentence": "ok", "label": 2}]


def test_parquet(tmp_path):
  pq = pytest.importorskip(
    "pyarrow.parquet", reason="pyarrow not installed: parquet is optional"
  )
  import pyarrow as pa

  table = pa.table(
    {"sentence": ["good", "bad"], "label": [1, 0], "idx": [0, 1]}
  )
  pq.write_table(table, tmp_path / "train-00000-of-00001.parquet")
  rows = mezo_tasks.read_records(tmp_path / "train-00000-of-00001.parquet")
  assert mezo_tasks.normalize_classification("sst2", rows)[0]["label"] == 1


def test_sampling():
  ex = [{"label": i % 3, "i": i} for i in range(300)]
  few = mezo_tasks.sample_per_class(ex, 16, seed=42)
  counts = np.bincount([e["label"] for e in few])
  assert counts.tolist() == [16, 16, 16]
  assert few == mezo_tasks.sample_per_class(ex, 16, seed=42)
  assert few != mezo_tasks.sample_per_class(ex, 16, seed=43)
  n = mezo_tasks.sample_examples(ex, 100, seed=0)
  assert len(n) == 100 and len({e["i"] for e in n}) == 100
  assert len(mezo_tasks.sample_examples(ex, 1000, seed=0)) == 300
  with pytest.raises(ValueError, match="fewer than k"):
    mezo_tasks.sample_per_class(ex, 101, seed=0)


def test_template_strings():
  t = prompts.TEMPLATES
  assert t["sst2"].candidates({"sentence": " a fine film "}) == [
    "a fine film It was terrible",
    "a fine film It was great",
  ]
  assert t["rte"].candidates({"premise": "P.", "hypothesis": "H."})[0] == (
    'P.\nDoes this mean that "H." is true? Yes or No?\nYes'
  )
  assert t["boolq"].candidates({"passage": "P.", "question": "is it"}) == [
    "P. Is it? No",
    "P. Is it? Yes",
  ]
  squad = {"title": "T", "context": "C.", "question": " Q? ", "answers": ["A"]}
  assert t["squad"].with_answer(squad, "A") == (
    "Title: T\nContext: C.\nQuestion: Q?\nAnswer: A"
  )
  assert t["drop"].prompt(squad) == "Passage: C.\nQuestion: Q?\nAnswer:"


def _char_tokenizer(tmp_path):
  """Byte-level BPE with no merges (one token per byte), OPT specials."""
  from tokenizers.pre_tokenizers import ByteLevel

  vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
  for ch in sorted(ByteLevel.alphabet()):
    vocab[ch] = len(vocab)
  (tmp_path / "vocab.json").write_text(json.dumps(vocab))
  (tmp_path / "merges.txt").write_text("#version: 0.2\n")
  return load_bpe_tokenizer(tmp_path), len(vocab)


def test_loss_masks_cover_exactly_the_option(tmp_path):
  tok, _ = _char_tokenizer(tmp_path)
  ex = [{"sentence": "good", "label": 1}, {"sentence": "meh", "label": 0}]
  b = prompts.candidate_batch("sst2", ex, tok, max_length=40, pad_id=1)
  assert b["input_ids"].shape == (4, 40)
  for row, word in zip(range(4), ["terrible", "great"] * 2):
    m = b["loss_mask"][row].astype(bool)
    # the option is " <word>": one token per byte, the space included
    assert tok.decode(b["input_ids"][row][m].tolist()) == " " + word
    assert m.sum() == len(word) + 1
  assert b["input_ids"][0, 0] == 2  # OPT's BOS
  train = prompts.training_batch("sst2", ex, tok, max_length=40, pad_id=1)
  np.testing.assert_array_equal(train["input_ids"][0], b["input_ids"][1])
  np.testing.assert_array_equal(train["input_ids"][1], b["input_ids"][2])
  squad = [{"title": "T", "context": "C", "question": "Q", "answers": ["Ab"]}]
  g = prompts.training_batch("squad", squad, tok, max_length=12, pad_id=1)
  m = g["loss_mask"][0].astype(bool)
  assert tok.decode(g["input_ids"][0][m].tolist()) == " Ab"
  assert g["attention_mask"][0].sum() == 12  # left-truncated, answer kept


def test_squad_metrics():
  # the official script's cases
  assert qa.exact_match("the Broncos", "Broncos") == 1.0
  assert qa.exact_match("Denver Broncos!", "denver broncos") == 1.0
  assert qa.normalize_answer("  The  Cat, an apple. ") == "cat apple"
  # pred "denver broncos team" vs gold "broncos": P=1/3, R=1, F1=0.5
  assert qa.token_f1("Denver Broncos team", "Broncos") == pytest.approx(0.5)
  assert qa.token_f1("Panthers", "Broncos") == 0.0
  s = qa.squad_scores(
    ["Broncos", "Carolina"],
    [["Denver Broncos", "Broncos"], ["Carolina Panthers"]],
  )
  # example 1: EM 1, F1 1; example 2: EM 0, F1 2*(1*0.5)/1.5 = 2/3
  assert s["exact_match"] == pytest.approx(0.5)
  assert s["f1"] == pytest.approx((1 + 2 / 3) / 2)


def test_llm_tasks_registered_and_fail_fast(tmp_path):
  import ml_collections

  for name in ("sst2", "rte", "boolq", "mnli", "squad", "drop", "trec"):
    assert f"{name}_opt" in TASKS
  config = ml_collections.ConfigDict(
    {"dataset": "squad_opt", "data_dir": str(tmp_path), "model_dir": ""}
  )
  with pytest.raises(MissingDataError, match="dev-v1.1.json"):
    get_task(config)
  (tmp_path / "sst2").mkdir()
  (tmp_path / "sst2" / "train.jsonl").write_text(
    json.dumps({"sentence": "a", "label": 1, "idx": 0}) + "\n"
  )
  config.dataset = "sst2_opt"
  with pytest.raises(MissingDataError, match="validation"):
    get_task(config)
  (tmp_path / "sst2" / "validation.jsonl").write_text(
    json.dumps({"sentence": "b", "label": 0, "idx": 0}) + "\n"
  )
  with pytest.raises(MissingDataError, match="config.json"):
    get_task(config)


def test_llm_task_end_to_end(tmp_path, monkeypatch):
  import ml_collections

  tok, vocab_size = _char_tokenizer(tmp_path)
  cfg = _tiny_opt_config(vocab_size, layers=1, positions=40)
  params = OPTForCausalLM(cfg).init(
    jax.random.key(1), np.ones((1, 4), np.int32)
  )["params"]
  monkeypatch.setattr(
    llm, "_causal_lm", lambda config: (OPTForCausalLM, cfg, params, tok)
  )
  monkeypatch.setattr(  # the model above is built here, not read from files
    llm.llm_files, "missing_model_files", lambda config: ("", [], "")
  )
  (tmp_path / "sst2").mkdir()
  for split, n in (("train", 12), ("validation", 5)):
    rows = [{"sentence": f"s{i}", "label": i % 2, "idx": i} for i in range(n)]
    (tmp_path / "sst2" / f"{split}.jsonl").write_text(
      "\n".join(map(json.dumps, rows))
    )
  config = ml_collections.ConfigDict(
    {
      "dataset": "sst2_opt",
      "data_dir": str(tmp_path),
      "examples_per_class": 3,
      "max_length": 24,
    }
  )
  task = get_task(config)
  assert task.train_inputs["input_ids"].shape == (6, 2, 24)
  assert np.bincount(task.train_labels).tolist() == [3, 3]
  assert task.test_inputs["input_ids"].shape == (5, 2, 24)
  trainable, frozen = task.init(jax.random.key(0))
  logits = np.asarray(task.apply(trainable, frozen, task.test_inputs))
  flat = {k: v.reshape(10, 24) for k, v in task.test_inputs.items()}
  losses = per_example_lm_loss(params, flat, model=OPTForCausalLM(cfg))
  np.testing.assert_allclose(logits, -np.asarray(losses).reshape(5, 2))
  ce = task.batched_loss(
    trainable, frozen, (task.test_inputs, task.test_labels)
  )
  assert ce.shape == (5,) and np.all(np.isfinite(ce))

  # LoRA (DP-ZO Table 1): the adapters are trainable, the pretrained
  # weights frozen, and with B = 0 the model is unchanged.
  config.peft = "lora"
  config.lora_targets = r"self_attn/(q_proj|v_proj)/kernel$"
  task = get_task(config)
  adapters, frozen = task.init(jax.random.key(0))
  leaves = jax.tree_util.tree_flatten_with_path(adapters)[0]
  names = {str(path[-1]) for path, _ in leaves}
  assert names == {"['lora_A']", "['lora_B']"}, names
  assert jax.tree.structure(frozen) == jax.tree.structure(params)
  np.testing.assert_allclose(
    np.asarray(task.apply(adapters, frozen, task.test_inputs)), logits
  )

  # Prefix tuning (MeZO): 2 prefix keys and values per layer, from the
  # activations of random tokens; the pretrained weights frozen.
  config.peft = "prefix"
  config.num_prefix_tokens = 2
  task = get_task(config)
  prefixes, frozen = task.init(jax.random.key(0))
  sa = prefixes["layers"]["self_attn"]
  assert set(sa) == {"prefix_keys", "prefix_values"}
  assert sa["prefix_keys"].shape == (1, 2, cfg.hidden_size)
  assert jax.tree.structure(frozen) == jax.tree.structure(params)
  with_prefix = np.asarray(task.apply(prefixes, frozen, task.test_inputs))
  assert with_prefix.shape == logits.shape
  assert np.max(np.abs(with_prefix - logits)) > 1e-4  # the prefix is seen


def test_generation_evaluation_on_tiny_opt(tmp_path):
  tok, vocab_size = _char_tokenizer(tmp_path)
  assert qa_generation.answer_text(tok, tok.encode(" Ab\nC").ids) == "Ab"
  cfg = _tiny_opt_config(vocab_size, layers=1, positions=56)
  model = OPTForCausalLM(cfg)
  params = model.init(jax.random.key(2), np.ones((1, 4), np.int32))["params"]
  ex = [
    {"title": "T", "context": "C", "question": "Q", "answers": ["x"]},
    {"title": "T", "context": "D", "question": "R", "answers": ["y"]},
  ]
  b = qa_generation.prompt_batch("squad", ex, tok, max_length=48, pad_id=1)
  assert b["attention_mask"][0, -1] == 1 and b["attention_mask"][0, 0] == 0
  real = b["input_ids"][0][b["attention_mask"][0] == 1].tolist()
  assert tok.decode(real) == "Title: T\nContext: C\nQuestion: Q\nAnswer:"
  res = qa_generation.evaluate_generation(
    params, "squad", ex, tok, model=model, prompt_length=48, max_new_tokens=4
  )
  golds = [e["answers"] for e in ex]
  assert res == {**qa.squad_scores(res["predictions"], golds), **res}
  assert len(res["predictions"]) == 2 and 0.0 <= res["f1"] <= 1.0
