"""Text loaders on small files written here in each dataset's exact format,
plus the VADER loader on a synthetic sdist and (when cached) on the real one."""

import io
import json
import os
import tarfile

import numpy as np
import pytest

from zoprivacy.data.loaders import (
  HashingVocab,
  MissingDataError,
  build_vocab,
  encode,
  load_amazon_polarity,
  load_imdb,
  load_mnli,
  load_snli,
  load_sst2,
  load_vader,
  load_vader_corpus,
  load_vader_private_public,
  mnli_prompt,
  prompts_for,
  read_amazon_csv,
  sst2_prompt,
  tokenize,
  vader,
)


# ---------------------------------------------------------------- VADER
def _tar_bytes(files):
  buf = io.BytesIO()
  with tarfile.open(fileobj=buf, mode="w:gz") as tar:
    for name, data in files.items():
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
  return buf.getvalue()


CORPUS_TEXT = {
  "movieReviewSnippets": "1\t2.26666666667\tThe Rock is destined to be great.\r\n"
  "2\t-0.6\tEffective but too tepid biopic\r\n"
  "3\t0.0\tA neutral sentence.\r\n"
  "4\t1.5\tcontains\ta tab\r\n",
  "amazonReviewSnippets": "1_1\t-0.9\ttroubleshooting ad-2500.\r\n1_2\t0.4\tnice player\r\n",
  "tweets": "1\t2.7\tamazing friends\r\n2\t-1.2\tugh\r\n3\t0\tmeh",
  "nytEditorialSnippets": "1_1\t0.4\tOn Dec. 19\r\n",
}


def _fake_sdist(path):
  inner = {
    f"hutto_ICWSM_2014/{c}_GroundTruth.txt": t.encode()
    for c, t in CORPUS_TEXT.items()
  }
  inner["hutto_ICWSM_2014/_README_.txt"] = b"readme"
  outer = {
    vader.INNER_ARCHIVE: _tar_bytes(inner),
    "vaderSentiment-3.3.2/setup.py": b"",
  }
  path.write_bytes(_tar_bytes(outer))


def test_vader_reads_extracted_cache(tmp_path, monkeypatch):
  sdist = tmp_path / vader.SDIST_NAME
  _fake_sdist(sdist)
  vader.extract_ground_truth(sdist, tmp_path)
  movie = load_vader_corpus("movieReviewSnippets", tmp_path)
  # zero rating dropped; tabs inside the text kept
  assert list(movie.inputs) == [
    "The Rock is destined to be great.",
    "Effective but too tepid biopic",
    "contains\ta tab",
  ]
  np.testing.assert_array_equal(movie.labels, [1, 0, 1])
  tweets = load_vader_corpus("tweets", tmp_path)
  assert len(tweets) == 2 and list(tweets.labels) == [1, 0]
  # env var override of the cache root: $ZOPRIVACY_DATA_DIR/vader
  (tmp_path / "root").mkdir()
  vader.extract_ground_truth(sdist, tmp_path / "root" / "vader")
  monkeypatch.setenv("ZOPRIVACY_DATA_DIR", str(tmp_path / "root"))
  assert len(load_vader_corpus("amazonReviewSnippets")) == 2
  private, public = load_vader_private_public(tmp_path, test_fraction=0.34)
  assert len(private.train) + len(private.test) == 3
  assert len(public) == 4 and public.name == "vader/amazonReviewSnippets+tweets"


def test_vader_missing_names_fetch_command(tmp_path):
  with pytest.raises(MissingDataError) as e:
    load_vader_corpus("tweets", tmp_path / "nowhere")
  assert e.value.missing[0].endswith("hutto_ICWSM_2014/tweets_GroundTruth.txt")
  assert "python -m zoprivacy.data.loaders.vader --fetch --cache-dir" in str(
    e.value
  )
  with pytest.raises(ValueError, match="unknown VADER corpus"):
    load_vader_corpus("imdb", tmp_path)


def test_vader_rejects_malformed_line():
  with pytest.raises(ValueError, match="not a number"):
    vader.parse_ground_truth("1\tabc\ttext\n", "f")


def _real_vader_dir():
  for d in (os.environ.get("ZOPRIVACY_DATA_DIR"), "~/.cache/zoprivacy"):
    if d and os.path.exists(
      os.path.expanduser(
        f"{d}/vader/hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"
      )
    ):
      return os.path.expanduser(f"{d}/vader")
  return None


@pytest.mark.skipif(
  _real_vader_dir() is None,
  reason="VADER not fetched; run python -m zoprivacy.data.loaders.vader --fetch",
)
def test_vader_real_corpora():
  cache = _real_vader_dir()
  s = load_vader("movieReviewSnippets", cache, test_fraction=0.2, seed=0)
  assert (
    len(s.train) + len(s.test) == 10568
  )  # 10,605 sentences minus 37 zero ratings
  assert abs(s.train.labels.mean() - 0.496) < 0.01
  assert len(load_vader_corpus("tweets", cache)) == 4196


# ---------------------------------------------------------------- IMDB
def test_imdb_layout(tmp_path):
  root = tmp_path / "aclImdb"
  reviews = {
    ("train", "pos"): {
      "0_9.txt": "Great film!<br /><br />Loved it.",
      "10_7.txt": "Good.",
    },
    ("train", "neg"): {"3_1.txt": "Awful.", "2_4.txt": "Bad \"acting\"."},
    ("test", "pos"): {"0_10.txt": "Superb"},
    ("test", "neg"): {"5_2.txt": "Boring"},
  }
  for (split, cls), files in reviews.items():
    (root / split / cls).mkdir(parents=True)
    for name, text in files.items():
      (root / split / cls / name).write_text(text, encoding="utf-8")
  (root / "train" / "unsup").mkdir()
  (root / "train" / "unsup" / "0_0.txt").write_text("ignored")
  (root / "train" / "urls_pos.txt").write_text("http://x")
  s = load_imdb(tmp_path)
  # neg (label 0) first, files in id order
  assert list(s.train.inputs) == [
    "Bad \"acting\".",
    "Awful.",
    "Great film!<br /><br />Loved it.",
    "Good.",
  ]
  np.testing.assert_array_equal(s.train.labels, [0, 0, 1, 1])
  np.testing.assert_array_equal(s.test.labels, [0, 1])
  (root / "train" / "pos" / "11_2.txt").write_text("mislabelled")
  with pytest.raises(ValueError, match="inconsistent"):
    load_imdb(root)


def test_imdb_missing(tmp_path):
  (tmp_path / "aclImdb" / "train" / "pos").mkdir(parents=True)
  with pytest.raises(MissingDataError) as e:
    load_imdb(tmp_path)
  assert sorted(p.split("aclImdb/")[1] for p in e.value.missing) == [
    "test/neg",
    "test/pos",
    "train/neg",
  ]


# ---------------------------------------------------------------- Amazon Polarity
AMAZON_TRAIN = (
  '"2","Stuning even for the non-gamer","This sound track was beautiful! '
  'It paints the senery in your mind."\n'
  '"1","Buyer beware","This is a self-published book, and if you want to know '
  'why--read a few paragraphs! Those 5 star reviews must have been written by '
  'Ms. Haddon\'s family and friends--or perhaps, by herself!"\n'
  '"2","A ""great"" read","Line one\\nline two, with a comma"\n'
)


def test_amazon_polarity_csv(tmp_path):
  root = tmp_path / "amazon_review_polarity_csv"
  root.mkdir()
  (root / "train.csv").write_text(AMAZON_TRAIN, encoding="utf-8")
  (root / "test.csv").write_text(
    '"1","Bad","Broke after a day"\n', encoding="utf-8"
  )
  s = load_amazon_polarity(tmp_path)
  np.testing.assert_array_equal(s.train.labels, [1, 0, 1])
  assert s.train.inputs[2] == 'A "great" read Line one line two, with a comma'
  assert s.test.inputs[0] == "Bad Broke after a day"
  only_content = load_amazon_polarity(root, join_title=False)
  assert only_content.train.inputs[0].startswith("This sound track")
  sample = read_amazon_csv(root / "train.csv", sample_size=2, seed=3)
  assert len(sample) == 2 and set(sample.inputs) <= set(s.train.inputs)
  head = read_amazon_csv(root / "train.csv", head=2)
  assert list(head.inputs) == list(s.train.inputs[:2])
  # the keyed-hash sample is uniform over seeds: each row kept w.p. 1/3
  rows = []
  many = "".join(f'"{1 + i % 2}","t{i}","c{i}"\n' for i in range(30))
  (root / "many.csv").write_text(many)
  for seed in range(300):
    rows.extend(
      read_amazon_csv(root / "many.csv", sample_size=10, seed=seed).inputs
    )
  _, counts = np.unique(rows, return_counts=True)
  assert (
    len(counts) == 30 and counts.min() > 60 and counts.max() < 140
  )  # mean 100
  (root / "test.csv").write_text('"3","x","y"\n')
  with pytest.raises(ValueError, match="label 1 or 2"):
    load_amazon_polarity(root)


# ---------------------------------------------------------------- GLUE / SNLI
MNLI_TRAIN_HEADER = (
  "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse"
  "\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label"
)
MNLI_DEV_HEADER = (
  "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse"
  "\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3"
  "\tlabel4\tlabel5\tgold_label"
)


def _mnli_row(i, s1, s2, labels):
  return "\t".join(
    [
      str(i),
      "31193",
      f"{i}n",
      "government",
      "( ( x ) )",
      "( y )",
      "(ROOT x)",
      "(ROOT y)",
      s1,
      s2,
    ]
    + labels
  )


def test_mnli_sst2_snli(tmp_path):
  mnli = tmp_path / "MNLI"
  mnli.mkdir()
  (mnli / "train.tsv").write_text(
    "\n".join(
      [
        MNLI_TRAIN_HEADER,
        _mnli_row(
          0,
          'Conceptually cream skimming has two basic dimensions - product and geography.',
          'Product and geography are what make cream skimming work. ',
          ["neutral", "neutral"],
        ),
        _mnli_row(
          1,
          'He said, "yeah',
          "He didn't say a thing.",
          ["contradiction", "contradiction"],
        ),
        _mnli_row(
          2,
          "One of our number will carry out your instructions.",
          "A member of my team will execute your orders.",
          ["entailment", "entailment"],
        ),
      ]
    )
    + "\n"
  )
  (mnli / "dev_matched.tsv").write_text(
    "\n".join(
      [
        MNLI_DEV_HEADER,
        _mnli_row(
          0,
          "The new rights are nice enough",
          "Everyone really likes the newest benefits",
          [
            "neutral",
            "entailment",
            "neutral",
            "neutral",
            "neutral",
            "neutral",
          ],
        ),
        _mnli_row(
          1,
          "no gold",
          "dropped",
          [
            "neutral",
            "entailment",
            "contradiction",
            "neutral",
            "entailment",
            "-",
          ],
        ),
      ]
    )
    + "\n"
  )
  s = load_mnli(tmp_path)
  assert s.train.inputs.shape == (3, 2) and s.train.num_classes == 3
  np.testing.assert_array_equal(s.train.labels, [1, 2, 0])
  assert s.train.inputs[1, 0] == 'He said, "yeah'  # unbalanced quote survives
  assert len(s.test) == 1 and s.test.labels[0] == 1
  with pytest.raises(MissingDataError, match="dev_mismatched.tsv"):
    load_mnli(mnli, test_split="dev_mismatched")

  sst = tmp_path / "SST-2"
  sst.mkdir()
  (sst / "train.tsv").write_text(
    "sentence\tlabel\nhide new secretions from the parental units \t0\n"
    "contains no wit , only labored gags \t0\n"
    "that loves its characters \t1\n"
  )
  (sst / "dev.tsv").write_text(
    "sentence\tlabel\nit 's a charming and often affecting journey . \t1\n"
  )
  s2 = load_sst2(tmp_path)
  np.testing.assert_array_equal(s2.train.labels, [0, 0, 1])
  assert (
    s2.train.inputs[2] == "that loves its characters" and s2.test.labels[0] == 1
  )

  snli = tmp_path / "snli_1.0"
  snli.mkdir()
  rows = [
    {
      "annotator_labels": ["neutral"],
      "captionID": "1",
      "gold_label": "neutral",
      "pairID": "1n",
      "sentence1": "A person on a horse jumps over a broken down airplane.",
      "sentence1_binary_parse": "( x )",
      "sentence1_parse": "(ROOT x)",
      "sentence2": "A person is training his horse for a competition.",
      "sentence2_binary_parse": "( y )",
      "sentence2_parse": "(ROOT y)",
    },
    {"gold_label": "-", "sentence1": "a", "sentence2": "b"},
    {
      "gold_label": "entailment",
      "sentence1": "Kids smiling.",
      "sentence2": "Kids are happy.",
    },
  ]
  for split in ("train", "test"):
    (snli / f"snli_1.0_{split}.jsonl").write_text(
      "\n".join(json.dumps(r) for r in rows) + "\n"
    )
  s3 = load_snli(tmp_path)
  np.testing.assert_array_equal(s3.train.labels, [1, 0])
  assert s3.test.inputs[1, 1] == "Kids are happy."
  # the .txt TSV release is used when there is no jsonl
  for split in ("train", "test"):
    (snli / f"snli_1.0_{split}.jsonl").unlink()
    (snli / f"snli_1.0_{split}.txt").write_text(
      "gold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
      "sentence2_parse\tsentence1\tsentence2\tcaptionID\tpairID\tlabel1\n"
      "contradiction\t( x )\t( y )\t(ROOT x)\t(ROOT y)\tA dog runs.\tA cat sleeps.\t1\t1c\t"
      "contradiction\n"
    )
  s4 = load_snli(snli)
  assert (
    s4.train.labels.tolist() == [2] and s4.train.inputs[0, 1] == "A cat sleeps."
  )
  (snli / "snli_1.0_test.txt").unlink()
  with pytest.raises(MissingDataError, match="snli_1.0_test.jsonl"):
    load_snli(snli)


# ---------------------------------------------------------------- text utilities
def test_vocab_and_encoding():
  texts = ["Great movie!<br />Great acting.", "bad movie", "it's great"]
  assert tokenize(texts[0]) == ["great", "movie", "!", "great", "acting"]
  vocab = build_vocab(texts, max_size=3)
  assert vocab.itos == ("<pad>", "<unk>", "great", "movie", "!")
  ids, lengths = encode(["great movie zzz", ""], vocab, max_len=2)
  np.testing.assert_array_equal(ids, [[2, 3], [1, 0]])
  np.testing.assert_array_equal(lengths, [2, 1])
  ids, _ = encode(["great movie zzz"], vocab, max_len=2, truncate="start")
  np.testing.assert_array_equal(ids, [[3, 1]])


def test_hashing_vocab_reads_no_data():
  v = HashingVocab(50)
  assert len(v) == 52 and (v.pad_id, v.unk_id) == (0, 1)
  words = ("great", "movie", "zyzzyva")
  ids = [v.token_id(w) for w in words]
  # A fixed function of the word (checkpoints depend on it): pinned.
  assert ids == [46, 6, 3]
  assert [
    HashingVocab(50, key=b"another key").token_id(w) for w in words
  ] != ids
  # Each row depends on its own text only; the empty text is one id 1.
  rows, lengths = encode(["great movie", "zyzzyva " * 9, ""], v, max_len=4)
  alone, _ = encode(["great movie"], v, max_len=4)
  np.testing.assert_array_equal(rows[0], alone[0])
  np.testing.assert_array_equal(rows[0], [46, 6, 0, 0])
  np.testing.assert_array_equal(rows[2], [1, 0, 0, 0])
  np.testing.assert_array_equal(lengths, [2, 4, 1])


def test_prompt_templates():
  assert (
    mnli_prompt("The cat sat.", "A cat is sitting.")
    == "The cat sat?<mask>, a cat is sitting."
  )
  assert sst2_prompt("a gem ", "<mask>") == "a gem It was<mask>."
  pairs = np.array([["P1.", "H1"]], dtype=object)
  assert prompts_for("mnli", pairs, "[MASK]") == ["P1?[MASK], h1"]
