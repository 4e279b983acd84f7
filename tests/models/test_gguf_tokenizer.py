"""The byte-level BPE tokenizer built from a GGUF file's metadata, on tiny
files written by ``gguf.GGUFWriter`` (``tiny_gguf.py``)."""

import pytest
import tiny_gguf

from zoprivacy.models.gguf_tokenizer import gguf_tokenizer

pytest.importorskip("gguf", reason="needs gguf (pip install gguf)")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  root = tmp_path_factory.mktemp("tok")
  out = {}
  for name, kw in {
    "smollm": {},
    "bos": dict(add_bos=True),
    "gpt-2": dict(pre="gpt-2"),
  }.items():
    tiny_gguf.write_tiny_gguf(root / f"{name}.gguf", **kw)
    out[name] = root / f"{name}.gguf"
  return out


def test_vocabulary_merges_and_control_tokens(files):
  tok = gguf_tokenizer(files["smollm"])
  tokens, _ = tiny_gguf.byte_level_vocab()
  assert tok.get_vocab_size() == len(tokens) == 384
  trained = tiny_gguf.trained_tokenizer()
  for text in tiny_gguf.CORPUS[:8] + ["unseen words: zebra, quixotic!"]:
    assert tok.encode(text).ids == trained.encode(text).ids  # no digits
  enc = tok.encode("the film was great<|im_start|>")
  assert enc.ids[-1] == tokens.index("<|im_start|>") == 1  # matched whole
  text = "A film, 10/10 — déjà vu!\n\tok"
  assert tok.decode(tok.encode(text).ids) == text


def test_smollm_splits_every_digit_and_gpt2_does_not(files):
  """The vocabulary has the merge "Ġ2" (learnt with GPT-2's split): the
  "gpt-2" rule uses it, the "smollm" rule never does (digits stand
  alone)."""
  assert gguf_tokenizer(files["smollm"]).encode(" 2024").tokens == [
    "Ġ", "2", "0", "2", "4"
  ]  # fmt: skip
  assert gguf_tokenizer(files["gpt-2"]).encode(" 2024").tokens[0] == "Ġ2"


def test_bos_as_the_metadata_says(files):
  plain = gguf_tokenizer(files["smollm"]).encode("the film").ids
  with_bos = gguf_tokenizer(files["bos"]).encode("the film").ids
  assert with_bos == [1] + plain and plain[0] != 1


def test_padding_and_truncation(files):
  tok = gguf_tokenizer(files["smollm"], max_length=3)
  batch = tok.encode_batch(["the film was great fun", "the"])
  assert [len(e.ids) for e in batch] == [3, 3]
  assert batch[1].ids[1:] == [0, 0] and batch[1].attention_mask == [1, 0, 0]


def test_unknown_pre_tokenizer_and_sentencepiece_are_refused(tmp_path):
  path = tmp_path / "qwen.gguf"
  tiny_gguf.write_tiny_gguf(path, pre="qwen2")
  with pytest.raises(ValueError, match="'qwen2', a pre-tokenizer this loader"):
    gguf_tokenizer(path)
  path = tmp_path / "spm.gguf"
  tiny_gguf.write_tiny_gguf(path, tokenizer_model="llama")
  with pytest.raises(ValueError, match="tokenizer.ggml.model is 'llama'"):
    gguf_tokenizer(path)
