"""``configs/tiny_opt_squad.py`` through the runner: a generation task is
scored by F1 and exact match of its greedy answers (never an accuracy), on
data written here in the upstream SQuAD v1.1 JSON format; and the scores of
hand-made answers equal MeZO's formula."""

import collections
import json
import re
import string
import sys

import jax
import numpy as np
import pytest

from configs import tiny_opt_squad
from experiments import tasks
from experiments.run import metrics as metrics_lib
from experiments.run import report, train
from zoprivacy.data import prompts
from zoprivacy.data.loaders.mezo_tasks import load_squad_json
from zoprivacy.metrics import qa_generation
from zoprivacy.models.hf_checkpoint import load_bpe_tokenizer

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

sys.path.insert(0, str(tiny_opt_squad._FIXTURES))
import make_squad_synthetic  # noqa: E402


def _config(tmp_path, **overrides):
  config = tiny_opt_squad.get_config()
  config.data_dir = str(make_squad_synthetic.write(tmp_path / "data"))
  for key, value in overrides.items():
    setattr(config, key, value)
  return config


def test_the_shipped_files_are_the_generators_upstream_json(tmp_path):
  make_squad_synthetic.write(tmp_path)
  for name in ("train-v1.1.json", "dev-v1.1.json"):
    shipped = make_squad_synthetic.OUT / "squad" / name
    assert shipped.read_text() == (tmp_path / "squad" / name).read_text()
  dev = json.loads((tmp_path / "squad" / "dev-v1.1.json").read_text())
  assert dev["version"] == "1.1" and len(dev["data"]) == 16
  paragraph = dev["data"][0]["paragraphs"][0]
  for answer in paragraph["qas"][0]["answers"]:  # spans of the context
    start = answer["answer_start"]
    assert paragraph["context"][start:].startswith(answer["text"])


def _mezo_normalize(s):
  """MeZO's ``normalize_answer`` (large_models/metrics.py), verbatim in
  substance: lowercase, drop punctuation, drop articles, fix whitespace."""
  s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
  return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def _mezo_scores(predictions, golds):
  """MeZO's ``calculate_metric`` for "em" and "f1": the best over golds."""
  em, f1 = [], []
  for pred, answers in zip(predictions, golds):
    em.append(any(_mezo_normalize(a) == _mezo_normalize(pred) for a in answers))
    best = 0.0
    for a in answers:
      p, g = _mezo_normalize(pred).split(), _mezo_normalize(a).split()
      same = sum((collections.Counter(p) & collections.Counter(g)).values())
      if same:
        precision, recall = same / len(p), same / len(g)
        best = max(best, 2 * precision * recall / (precision + recall))
    f1.append(best)
  return float(np.mean(f1)), float(np.mean(em))


def test_hand_made_answers_score_as_mezo_computes(tmp_path, monkeypatch):
  """The task's evaluation with the decoder replaced by hand-made answers
  (each continuation has text after a newline, which must be cut): F1 and
  EM equal MeZO's formula and the hand-computed values."""
  config = _config(tmp_path)
  task = tasks.get_task(config)
  assert task.metric_names == ("test_f1", "test_exact_match")
  tok = load_bpe_tokenizer(config.model_dir)
  dev = tmp_path / "data" / "squad" / "dev-v1.1.json"
  template = prompts.TEMPLATES["squad"]
  golds = {template.prompt(e): e["answers"] for e in load_squad_json(dev)}
  assert len(golds) == config.num_eval == 16  # every question, distinct
  styles = (
    lambda city: city,  # EM 1, F1 1
    lambda city: f"The {city.upper()}!",  # EM 1 after normalization
    lambda city: f"in {city} city",  # F1 0.8 against "in <city>"
    lambda city: "Oslo" if city != "Oslo" else "Rome",  # wrong: 0, 0
  )
  made = {}

  def fake_generate(params, ids, mask, max_new_tokens, *, model, **kw):
    del params, model
    out = np.full((len(ids), max_new_tokens), kw["pad_token_id"], np.int32)
    for row, (r, m) in enumerate(zip(ids, mask)):
      prompt = tok.decode(r[m == 1].tolist(), skip_special_tokens=True)
      made.setdefault(prompt, styles[len(made) % 4](golds[prompt][0]))
      text = " " + made[prompt] + "\nQuestion: x"  # cut at the newline
      new = tok.encode(text, add_special_tokens=False).ids[:max_new_tokens]
      out[row, : len(new)] = new
    return out

  monkeypatch.setattr(qa_generation, "generate", fake_generate)
  trainable, frozen = task.init(jax.random.key(0))
  scores = metrics_lib.evaluate_task(task, None, trainable, frozen)
  assert list(scores) == ["test_f1", "test_exact_match"]
  assert len(made) == 16
  f1, em = _mezo_scores([made[k] for k in golds], list(golds.values()))
  assert scores == pytest.approx({"test_f1": f1, "test_exact_match": em})
  # 16 questions, 4 of each style: EM (4 + 4) / 16; F1 (4 + 4 + 4 * 0.8) / 16
  assert em == pytest.approx(0.5) and f1 == pytest.approx(0.7)


@pytest.mark.slow  # ~15 s: compiles the decoder and the step
def test_runner_writes_f1_and_exact_match_never_accuracy(tmp_path):
  config = _config(tmp_path, workdir=str(tmp_path / "run"), num_steps=4)
  config.eval_every = 2
  result = train.train(config, progress=False)
  assert result["metric_names"] == ["test_f1", "test_exact_match"]
  for row in (result, *result["history"]):
    assert "test_accuracy" not in row
    assert 0.0 <= row["test_exact_match"] <= row["test_f1"] <= 1.0
  assert [h["step"] for h in result["history"]] == [0, 2, 4]
  assert 0.0 < result["epsilon"] <= config.privacy.target_epsilon
  csv = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
  assert csv[0] == (
    "step,test_f1,test_exact_match,epsilon,seconds,"
    "released_mean,released_rms,released_max_abs"
  )
  assert len(csv) == 4
  saved = json.loads((tmp_path / "run" / "result.json").read_text())
  assert saved["test_f1"] == result["test_f1"]
  assert "test_accuracy" not in saved
  text = report.format_report(result)
  assert f"test F1: {result['test_f1']:.4f}" in text
  assert f"test exact match: {result['test_exact_match']:.4f}" in text
  assert "accuracy" not in text
