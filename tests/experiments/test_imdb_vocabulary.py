"""The IMDB task's preprocessing reads no private data.

Two neighbouring training sets, the second with one extra review made of a
word no other text has, repeated so that it would be the most frequent word
of a vocabulary built from the training texts. The task built on each (from
files in aclImdb's and Amazon Polarity's exact layouts) must use the same
vocabulary and encode every other training review, every test review and
every public review identically, with the same model.
"""

import jax
import ml_collections
import numpy as np
import pytest

from configs import default
from experiments import tasks
from zoprivacy.data import loaders

CANARY_WORD = "zyzzyva"
CANARY = " ".join([CANARY_WORD] * 30) + " great film"
POS = ["a great film", "loved it", "superb and funny", "a joy to watch"]
NEG = ["a dull film", "hated it", "tedious and flat", "a chore to watch"]


@pytest.fixture(autouse=True)
def _isolated_data_root(tmp_path, monkeypatch):
  root = tmp_path / "data_root"
  root.mkdir()
  monkeypatch.setenv("ZOPRIVACY_DATA_DIR", str(root))


def _write(root, with_canary: bool):
  for split in ("train", "test"):
    for cls, texts in (("pos", POS), ("neg", NEG)):
      d = root / "aclImdb" / split / cls
      d.mkdir(parents=True)
      rating = 8 if cls == "pos" else 2
      for i, t in enumerate(texts):
        (d / f"{i}_{rating}.txt").write_text(f"{t} {split}<br />")
  # A test review with the canary word: the vocabularies must agree on it.
  (root / "aclImdb/test/pos/50_9.txt").write_text(f"a {CANARY_WORD} film")
  if with_canary:
    (root / "aclImdb/train/pos/99_10.txt").write_text(CANARY)
  a = root / "amazon_review_polarity_csv"
  a.mkdir()
  rows = [
    f'"{1 + i % 2}","title","{(POS if i % 2 else NEG)[i % 4]} product"'
    for i in range(8)
  ]
  (a / "train.csv").write_text("\n".join(rows) + "\n")
  (a / "test.csv").write_text(rows[0] + "\n")


def _config(root, vocab: str):
  c = default.get_config()
  c.dataset, c.model, c.data_dir = "imdb", "lstm", str(root)
  c.model_kwargs = ml_collections.ConfigDict({"embed_dim": 4, "hidden_size": 4})
  c.vocab, c.vocab_size, c.max_length = vocab, 6, 6
  c.public, c.public_size = "amazon", 4
  return c


def _build(root, vocab, monkeypatch):
  """The task and every vocabulary it encoded with."""
  seen, real = [], loaders.encode

  def spy(texts, v, max_len, **kw):
    seen.append(v)
    return real(texts, v, max_len, **kw)

  monkeypatch.setattr(loaders, "encode", spy)
  task = tasks.get_task(_config(root, vocab))
  monkeypatch.setattr(loaders, "encode", real)
  return task, seen


def _assert_trees_equal(a, b):
  assert jax.tree.structure(a) == jax.tree.structure(b)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("vocab", ["amazon", "hash"])
def test_a_neighbouring_training_set_changes_no_other_encoding(
  tmp_path, monkeypatch, vocab
):
  _write(tmp_path / "d", with_canary=False)
  _write(tmp_path / "d_plus", with_canary=True)
  task, vocabs = _build(tmp_path / "d", vocab, monkeypatch)
  task_plus, vocabs_plus = _build(tmp_path / "d_plus", vocab, monkeypatch)

  # One vocabulary for the training, test and public texts, the same for both.
  assert len(vocabs) == 3 and all(v == vocabs[0] for v in vocabs + vocabs_plus)

  texts = loaders.load_imdb(tmp_path / "d_plus").train.inputs
  (canary,) = np.flatnonzero(texts == CANARY)
  others = np.delete(np.arange(len(texts)), canary)
  assert task_plus.num_train == task.num_train + 1
  _assert_trees_equal(
    (
      jax.tree.map(lambda a: a[others], task_plus.train_inputs),
      task_plus.train_labels[others],
    ),
    (task.train_inputs, task.train_labels),
  )
  _assert_trees_equal(task_plus.test_inputs, task.test_inputs)
  _assert_trees_equal(task_plus.public_inputs, task.public_inputs)
  key = jax.random.key(0)
  _assert_trees_equal(task_plus.init(key), task.init(key))
  if vocab == "amazon":  # the canary word is no public word: unknown
    assert task_plus.train_inputs["tokens"][canary, 0] == vocabs[0].unk_id


def test_the_canary_would_renumber_a_vocabulary_of_the_training_texts(
  tmp_path,
):
  """The test above has power: built from the training texts, a vocabulary
  would change with the canary, and with it the other reviews' encodings."""
  _write(tmp_path / "d", with_canary=False)
  _write(tmp_path / "d_plus", with_canary=True)
  train = loaders.load_imdb(tmp_path / "d").train.inputs
  train_plus = loaders.load_imdb(tmp_path / "d_plus").train.inputs
  v = loaders.build_vocab(train, max_size=6)
  v_plus = loaders.build_vocab(train_plus, max_size=6)
  assert v != v_plus
  ids, _ = loaders.encode(list(train), v, 6)
  ids_plus, _ = loaders.encode(list(train), v_plus, 6)
  assert (ids != ids_plus).any(axis=1).mean() > 0.5
