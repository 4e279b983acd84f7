"""The byte-level BPE tokenizer stored in a GGUF file's metadata, built with
``tokenizers``.

A GGUF file stores the vocabulary (``tokenizer.ggml.tokens``, in GPT-2's
byte-to-unicode spelling), the merges (``tokenizer.ggml.merges``, ``"a b"``
strings), each token's type (``tokenizer.ggml.token_type``: 1 normal, 3
control, 4 user-defined), the special ids (``bos_token_id``, ``eos_token_id``,
``padding_token_id``, ``unknown_token_id``), whether to prepend BOS
(``add_bos_token``) and the *name* of the pre-tokenizer
(``tokenizer.ggml.pre``), not its rules. :data:`PRE_TOKENIZERS` maps each
name this module knows to the rules llama.cpp applies for it:

* ``gpt-2``: GPT-2's split regex, byte-level;
* ``smollm`` (SmolLM, SmolLM2): every digit on its own, then GPT-2's regex.

Any other name (``default``, Llama 3's ``llama-bpe``, Qwen's, ...) is
refused, naming it: a wrong split would silently give token
ids the model was not trained on. Control tokens (``<|im_start|>``, ...) are
matched whole in the text, as llama.cpp and ``transformers`` do; BOS is
prepended only when ``add_bos_token`` says so (SmolLM2's file says no;
absent, no BOS).
SentencePiece vocabularies (``tokenizer.ggml.model = 'llama'``: Llama 1/2,
Mistral) are not built here: use the checkpoint's ``tokenizer.json``.
"""

from __future__ import annotations

from zoprivacy.models.gguf_checkpoint import field_value, open_gguf

CONTROL, USER_DEFINED = 3, 4


def _gpt2(pre):
  return pre.ByteLevel(add_prefix_space=False, use_regex=True)


def _smollm(pre):
  return pre.Sequence([pre.Digits(individual_digits=True), _gpt2(pre)])


# tokenizer.ggml.pre -> the pre-tokenizer (module docstring)
PRE_TOKENIZERS = {
  "gpt-2": _gpt2,
  "smollm": _smollm,
}


def _refuse(path, what: str, fix: str):
  raise ValueError(f"{path}: {what}. {fix}")


def _check_kind(reader, path) -> str:
  model = field_value(reader, "tokenizer.ggml.model")
  if model is None or field_value(reader, "tokenizer.ggml.tokens") is None:
    _refuse(
      path,
      "the GGUF metadata holds no tokenizer (tokenizer.ggml.model and "
      "tokenizer.ggml.tokens)",
      "Load the tokenizer from the model's tokenizer.json instead.",
    )
  if model != "gpt2":
    _refuse(
      path,
      f"tokenizer.ggml.model is {model!r}; only byte-level BPE ('gpt2': "
      "SmolLM, GPT-2 style vocabularies) is built from GGUF "
      "metadata",
      "For a SentencePiece vocabulary ('llama': Llama 1/2, Mistral) use the"
      " checkpoint's tokenizer.json.",
    )
  pre = field_value(reader, "tokenizer.ggml.pre", "default")  # llama.cpp's
  if pre not in PRE_TOKENIZERS:
    _refuse(
      path,
      f"tokenizer.ggml.pre is {pre!r}, a pre-tokenizer this loader does not "
      f"know (known: {', '.join(sorted(PRE_TOKENIZERS))}); the file stores "
      "only its name, and a guessed split would give token ids the model "
      "was not trained on",
      "Use the checkpoint's tokenizer.json, or add the name's split rules "
      "(llama.cpp's llama-vocab.cpp lists them) to PRE_TOKENIZERS.",
    )
  if field_value(reader, "tokenizer.ggml.add_space_prefix", False):
    _refuse(
      path,
      "tokenizer.ggml.add_space_prefix is true, which byte-level BPE "
      "vocabularies do not use",
      "Use the checkpoint's tokenizer.json.",
    )
  return pre


def _special(tok, ids: dict, tokens: list, add_bos: bool, add_eos: bool):
  """BOS/EOS post-processing as the metadata says, and padding."""
  from tokenizers import processors  # pylint: disable=g-import-not-at-top

  if add_bos or add_eos:
    bos, eos = tokens[ids["bos"]], tokens[ids["eos"]]
    single = ([f"{bos}:0"] if add_bos else []) + ["$A:0"]
    single += [f"{eos}:0"] if add_eos else []
    pair = single + ["$B:1"] + ([f"{eos}:1"] if add_eos else [])
    used = [(bos, ids["bos"])] * add_bos + [(eos, ids["eos"])] * add_eos
    tok.post_processor = processors.TemplateProcessing(
      single=single, pair=pair, special_tokens=list(dict(used).items())
    )
  pad_id = ids["pad"] if ids["pad"] is not None else ids["eos"]
  tok.enable_padding(pad_id=pad_id, pad_token=tokens[pad_id])


def gguf_tokenizer(path, *, reader=None, max_length: int | None = None):
  """A ``tokenizers.Tokenizer`` from a GGUF file's metadata (module
  docstring); pads with ``padding_token_id`` (else EOS) to the longest
  sequence and truncates to ``max_length`` if given. ``reader``: an open
  ``gguf.GGUFReader`` of ``path``, to avoid parsing the file twice."""
  from tokenizers import (  # pylint: disable=g-import-not-at-top
    AddedToken,
    Tokenizer,
    decoders,
    models,
    pre_tokenizers,  # pylint: disable=g-import-not-at-top
  )

  reader = open_gguf(path) if reader is None else reader
  pre = _check_kind(reader, path)
  get = lambda key, default=None: field_value(
    reader, f"tokenizer.ggml.{key}", default
  )
  tokens = get("tokens")
  merges = [tuple(m.split(" ", 1)) for m in get("merges") or []]
  if not merges:
    _refuse(
      path,
      "the GGUF metadata has no tokenizer.ggml.merges",
      "A byte-level BPE needs its merges; use the checkpoint's tokenizer.json.",
    )
  ids = {k: get(f"{k}_token_id") for k in ("bos", "eos", "unknown")}
  ids["pad"] = get("padding_token_id")
  ids["bos"] = 1 if ids["bos"] is None else ids["bos"]
  ids["eos"] = 2 if ids["eos"] is None else ids["eos"]
  vocab = {t: i for i, t in enumerate(tokens)}
  tok = Tokenizer(models.BPE(vocab, merges, fuse_unk=False))
  tok.pre_tokenizer = PRE_TOKENIZERS[pre](pre_tokenizers)
  tok.decoder = decoders.ByteLevel()
  types = get("token_type") or [1] * len(tokens)
  special = lambda kind: [t for t, k in zip(tokens, types) if k == kind]
  tok.add_special_tokens(
    [AddedToken(t, normalized=False, special=True) for t in special(CONTROL)]
  )
  tok.add_tokens(
    [AddedToken(t, normalized=False) for t in special(USER_DEFINED)]
  )
  add_bos = bool(get("add_bos_token", False))
  _special(tok, ids, tokens, add_bos, bool(get("add_eos_token", False)))
  if max_length is not None:
    tok.enable_truncation(max_length)
  return tok
