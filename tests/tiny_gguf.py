"""A tiny Llama GGUF file, written with llama.cpp's own ``gguf.GGUFWriter``
in the exact upstream format, from the ``tests/fixtures/tiny_llama``
safetensors checkpoint (2 blocks, 4 query heads, 2 key/value heads).

The writer does what llama.cpp's converter does: tensors renamed, query and
key rows permuted to the interleaved rotary layout (key heads 2, query heads
4), quantized per tensor. The vocabulary is a byte-level BPE of 384 tokens
(3 control tokens, GPT-2's 256-byte alphabet, 125 merges trained on a fixed
text), so the file's tokenizer metadata is a real one.
"""

from __future__ import annotations

import pathlib

import numpy as np

from zoprivacy.models.hf_checkpoint import SafetensorsCheckpoint
from zoprivacy.models.hf_llama import llama_tensor_names
from zoprivacy.models.llama import LlamaConfig

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "tiny_llama"
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CORPUS = [
  "the film was a delight and the cast was great",
  "a terrible movie with a dull plot and bad acting",
  "it was great fun, a moving story of love",
  "the music and the story were terrible",
  "an enjoyable comedy; charming performances throughout",
  "boring, predictable nonsense without any redeeming quality",
  "brilliant direction, beautiful photography, wonderful score",
  "awful dialogue, clumsy editing and lifeless characters",
  "rated 2 of 5, then 2 of 10: 2 stars",
] * 4
# GGUF name -> HF suffix of a block tensor
BLOCK = {
  "attn_q": "self_attn.q_proj",
  "attn_k": "self_attn.k_proj",
  "attn_v": "self_attn.v_proj",
  "attn_output": "self_attn.o_proj",
  "ffn_gate": "mlp.gate_proj",
  "ffn_up": "mlp.up_proj",
  "ffn_down": "mlp.down_proj",
  "attn_norm": "input_layernorm",
  "ffn_norm": "post_attention_layernorm",
}


def permute(weight: np.ndarray, heads: int) -> np.ndarray:
  """llama.cpp's converter: rows ``[heads, 2, d/2]`` -> ``[heads, d/2, 2]``."""
  w = weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
  return w.swapaxes(1, 2).reshape(weight.shape)


def trained_tokenizer(size: int = 384):
  """A byte-level BPE (``tokenizers.Tokenizer``, GPT-2's split) trained on
  :data:`CORPUS`."""
  from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

  tok = Tokenizer(models.BPE())
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  trainer = trainers.BpeTrainer(
    vocab_size=size,
    special_tokens=list(SPECIALS),
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False,
  )
  tok.train_from_iterator(CORPUS, trainer)
  return tok


def byte_level_vocab(size: int = 384):
  """``(tokens, merges)`` of :func:`trained_tokenizer`, as GGUF lists them."""
  import json

  tok = trained_tokenizer(size)
  vocab = tok.get_vocab()
  tokens = sorted(vocab, key=vocab.get)
  merges = json.loads(tok.to_str())["model"]["merges"]
  merges = [" ".join(m) if isinstance(m, list) else m for m in merges]
  return tokens, merges


def hf_tensors(names=FIXTURE):
  """``(config, {HF name: float32 array})`` of the fixture."""
  config = LlamaConfig.from_hf(names)
  ckpt = SafetensorsCheckpoint(names)
  wanted = llama_tensor_names(config)
  flat = [
    n for v in wanted.values() for n in ([v] if isinstance(v, str) else v)
  ]
  return config, {n: np.asarray(ckpt[n], np.float32) for n in flat}


def gguf_tensors(config: LlamaConfig, tensors: dict) -> dict:
  """``{GGUF name: [out, in] float32}``, query and key rows permuted."""
  out = {
    "token_embd.weight": tensors["model.embed_tokens.weight"],
    "output_norm.weight": tensors["model.norm.weight"],
  }
  if "lm_head.weight" in tensors:
    out["output.weight"] = tensors["lm_head.weight"]
  for layer in range(config.num_hidden_layers):
    for short, hf in BLOCK.items():
      w = tensors[f"model.layers.{layer}.{hf}.weight"]
      if short == "attn_q":
        w = permute(w, config.num_attention_heads)
      elif short == "attn_k":
        w = permute(w, config.num_key_value_heads)
      out[f"blk.{layer}.{short}.weight"] = w
  return out


def _metadata(writer, config: LlamaConfig, pre: str, add_bos: bool, model: str):
  writer.add_block_count(config.num_hidden_layers)
  writer.add_context_length(config.max_position_embeddings)
  writer.add_embedding_length(config.hidden_size)
  writer.add_feed_forward_length(config.intermediate_size)
  writer.add_head_count(config.num_attention_heads)
  writer.add_head_count_kv(config.num_key_value_heads)
  writer.add_layer_norm_rms_eps(config.rms_norm_eps)
  writer.add_rope_freq_base(config.rope_theta)
  writer.add_rope_dimension_count(config.head_dim)
  writer.add_vocab_size(config.vocab_size)
  tokens, merges = byte_level_vocab(config.vocab_size)
  writer.add_tokenizer_model(model)
  writer.add_tokenizer_pre(pre)
  writer.add_token_list(tokens)
  writer.add_token_types([3 if t in SPECIALS else 1 for t in tokens])
  writer.add_token_merges(merges)
  writer.add_bos_token_id(1)
  writer.add_eos_token_id(2)
  writer.add_pad_token_id(0)
  writer.add_add_bos_token(add_bos)


def write_tiny_gguf(
  path,
  *,
  types: dict | None = None,
  default_type: str = "F32",
  pre: str = "smollm",
  add_bos: bool = False,
  arch: str = "llama",
  drop: tuple = (),
  extra: dict | None = None,
  metadata=None,
  tokenizer_model: str = "gpt2",
):
  """Writes the fixture as a GGUF file at ``path``; returns ``(config,
  {GGUF name: the float32 tensor written, before quantization})``.

  ``types``: ``{GGUF name: type name}`` (``'Q4_0'``, ``'Q8_0'``, ...;
  default ``default_type``; 1-D tensors stay F32, as llama.cpp keeps them).
  ``drop``: GGUF names left out; ``extra``: more ``{name: array}``;
  ``metadata(writer)``: more keys; ``tokenizer_model``:
  ``tokenizer.ggml.model``.
  """
  import gguf

  config, tensors = hf_tensors()
  written = gguf_tensors(config, tensors)
  writer = gguf.GGUFWriter(str(path), arch)
  _metadata(writer, config, pre, add_bos, tokenizer_model)
  if metadata is not None:
    metadata(writer)
  for name, w in {**written, **(extra or {})}.items():
    if name in drop:
      continue
    kind = (types or {}).get(name, default_type if w.ndim == 2 else "F32")
    qtype = gguf.GGMLQuantizationType[kind]
    if kind == "F32":
      writer.add_tensor(name, np.ascontiguousarray(w, np.float32))
    elif kind == "F16":
      writer.add_tensor(name, np.ascontiguousarray(w, np.float16))
    else:
      try:
        data = gguf.quants.quantize(np.ascontiguousarray(w, np.float32), qtype)
      except NotImplementedError:  # no Python quantizer: zero blocks
        shape = gguf.quants.quant_shape_to_byte_shape(w.shape, qtype)
        data = np.zeros(shape, np.uint8)
      writer.add_tensor(name, data, raw_dtype=qtype)
  writer.write_header_to_file()
  writer.write_kv_data_to_file()
  writer.write_tensors_to_file()
  writer.close()
  return config, written
