"""Hugging Face checkpoint folders: safetensors (single file or sharded),
the OPT name mapping onto :class:`zoprivacy.models.opt.OPTForCausalLM`, and
the byte-level BPE tokenizer.

A checkpoint folder holds ``config.json`` and either ``model.safetensors`` or
``model.safetensors.index.json`` (``{"weight_map": {tensor name: shard file}}``)
with its shards ``model-00001-of-0000N.safetensors``. Tensors are read lazily
with ``safetensors.safe_open(..., framework="numpy")``, one at a time, so a
stacked parameter is the largest host array alive.

OPT tensors (``OPTForCausalLM``; the ``model.`` prefix may be absent in
checkpoints saved from ``OPTModel``)::

  model.decoder.embed_tokens.weight            [vocab, word_embed_proj_dim]
  model.decoder.embed_positions.weight         [max_position_embeddings + 2, hidden]
  model.decoder.project_in.weight / project_out.weight   (word_embed_proj_dim != hidden)
  model.decoder.final_layer_norm.{weight,bias}           (pre-LN models)
  model.decoder.layers.N.self_attn.{q,k,v,out}_proj.{weight,bias}
  model.decoder.layers.N.{self_attn_layer_norm,final_layer_norm}.{weight,bias}
  model.decoder.layers.N.{fc1,fc2}.{weight,bias}
  lm_head.weight                                (optional; tied to embed_tokens)

``torch.nn.Linear`` weights are ``[out, in]``; Flax kernels are ``[in, out]``.
Per-layer tensors are stacked on a leading layer axis for the ``nn.scan``.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.core import low_precision
from zoprivacy.models.opt import OPTConfig, OPTForCausalLM

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# an example checkpoint page per model_type (default: OPT's)
_EXAMPLE_SOURCES = {
  "opt": "https://huggingface.co/facebook/opt-1.3b",
  "llama": "https://huggingface.co/meta-llama/Llama-2-7b-hf",
  "mistral": "https://huggingface.co/mistralai/Mistral-7B-v0.1",
}


def _example_source(model_dir: Path) -> str:
  """The example page of the folder's model_type (config.json), else OPT's."""
  try:
    model_type = json.loads((model_dir / "config.json").read_text())[
      "model_type"
    ]
  except (OSError, ValueError, KeyError, TypeError):
    model_type = "opt"
  return _EXAMPLE_SOURCES.get(model_type, _EXAMPLE_SOURCES["opt"])


def _missing_files_error(model_dir: Path, missing: list[str]) -> str:
  present = (
    sorted(p.name for p in model_dir.iterdir()) if model_dir.is_dir() else []
  )
  return (
    f"{model_dir}: missing {', '.join(missing)}. A Hugging Face checkpoint "
    f"folder needs config.json and {SINGLE_FILE} (or {INDEX_FILE} with every "
    f"shard it names); download them from the model's page, e.g. "
    f"{_example_source(model_dir)} (files config.json, {SINGLE_FILE}, and for the "
    f"tokenizer tokenizer.json or vocab.json + merges.txt). "
    f"Present: {present or 'nothing'}."
    + (
      " (pytorch_model.bin is not read: use the safetensors files.)"
      if "pytorch_model.bin" in present
      else ""
    )
  )


def read_hf_config(model_dir) -> dict:
  """``config.json`` of a checkpoint folder as a dict."""
  model_dir = Path(model_dir)
  path = model_dir / "config.json"
  if not path.is_file():
    raise FileNotFoundError(_missing_files_error(model_dir, ["config.json"]))
  return json.loads(path.read_text())


class SafetensorsCheckpoint:
  """Lazy read access to the tensors of a (possibly sharded) checkpoint.

  ``names`` lists every tensor; ``checkpoint[name]`` reads one as numpy
  (bfloat16 via ``ml_dtypes``).
  """

  def __init__(self, model_dir):
    from safetensors import safe_open

    self._safe_open = safe_open
    model_dir = Path(model_dir)
    index = model_dir / INDEX_FILE
    if index.is_file():
      weight_map = json.loads(index.read_text())["weight_map"]
      shards = sorted(set(weight_map.values()))
      missing = [s for s in shards if not (model_dir / s).is_file()]
      if missing:
        raise FileNotFoundError(_missing_files_error(model_dir, missing))
      self._file_of = {k: model_dir / v for k, v in weight_map.items()}
    elif (model_dir / SINGLE_FILE).is_file():
      path = model_dir / SINGLE_FILE
      with safe_open(str(path), framework="numpy") as f:
        self._file_of = {k: path for k in f.keys()}
    else:
      raise FileNotFoundError(
        _missing_files_error(model_dir, [f"{SINGLE_FILE} (or {INDEX_FILE})"])
      )
    self.names = frozenset(self._file_of)

  def __contains__(self, name) -> bool:
    return name in self._file_of

  def __getitem__(self, name) -> np.ndarray:
    with self._safe_open(str(self._file_of[name]), framework="numpy") as f:
      return f.get_tensor(name)

  def shape(self, name) -> tuple[int, ...]:
    with self._safe_open(str(self._file_of[name]), framework="numpy") as f:
      return tuple(f.get_slice(name).get_shape())


# ---------------------------------------------------------------- OPT mapping
_LAYER_LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
_LAYER_LINEARS += ("self_attn.out_proj", "fc1", "fc2")
_LAYER_NORMS = ("self_attn_layer_norm", "final_layer_norm")


def _decoder_prefix(names) -> str:
  for prefix in ("model.decoder.", "decoder."):
    if prefix + "embed_tokens.weight" in names:
      return prefix
  raise KeyError(
    "no OPT decoder in this checkpoint: expected model.decoder.embed_tokens."
    f"weight (or decoder.embed_tokens.weight); found e.g. {sorted(names)[:5]}"
  )


def opt_tensor_names(config: OPTConfig, prefix: str) -> dict:
  """``{flax path: HF name (or list of per-layer names, to stack)}``."""
  c = config
  out = {
    ("embed_tokens", "embedding"): prefix + "embed_tokens.weight",
    ("embed_positions", "embedding"): prefix + "embed_positions.weight",
  }
  if c.has_projections:
    for name in ("project_in", "project_out"):
      out[(name, "kernel")] = prefix + name + ".weight"
  affine = c.layer_norm_elementwise_affine
  if c.has_final_layer_norm and affine:
    out[("final_layer_norm", "scale")] = prefix + "final_layer_norm.weight"
    out[("final_layer_norm", "bias")] = prefix + "final_layer_norm.bias"
  layers = range(c.num_hidden_layers)
  per_layer = lambda sub: [f"{prefix}layers.{i}.{sub}" for i in layers]
  for lin in _LAYER_LINEARS:
    path = ("layers",) + tuple(lin.split("."))
    out[path + ("kernel",)] = per_layer(lin + ".weight")
    if c.enable_bias:
      out[path + ("bias",)] = per_layer(lin + ".bias")
  if affine:
    for ln in _LAYER_NORMS:
      out[("layers", ln, "scale")] = per_layer(ln + ".weight")
      out[("layers", ln, "bias")] = per_layer(ln + ".bias")
  return out


def opt_params_from_hf(
  checkpoint, config: OPTConfig, *, param_dtype=jnp.float32
) -> dict:
  """Flax params of :class:`OPTForCausalLM` from HF OPT tensors.

  ``checkpoint``: a :class:`SafetensorsCheckpoint` or a dict of numpy arrays.
  Linear weights are transposed to kernels and per-layer tensors stacked on a
  leading layer axis; every leaf is cast to ``param_dtype``. Raises
  ``KeyError`` naming missing tensors and ``ValueError`` on a shape mismatch
  with ``config`` or an untied ``lm_head.weight``.
  """
  names = getattr(checkpoint, "names", None) or frozenset(checkpoint)
  wanted = opt_tensor_names(config, _decoder_prefix(names))
  model = OPTForCausalLM(config, param_dtype=param_dtype)
  params = params_from_names(checkpoint, wanted, model, param_dtype, "OPT")
  if "lm_head.weight" in names:
    embed = wanted[("embed_tokens", "embedding")]
    if not np.array_equal(checkpoint["lm_head.weight"], checkpoint[embed]):
      raise ValueError(
        "lm_head.weight differs from embed_tokens.weight: OPT ties them, an "
        "untied LM head is not supported"
      )
  return params


def params_from_names(checkpoint, wanted: dict, model, param_dtype, family):
  """Flax params of ``model`` from the HF tensors ``wanted`` names.

  ``wanted``: ``{flax path: HF name, or the per-layer names to stack}``.
  Linear weights (paths ending in ``kernel``) are transposed; every leaf is
  cast to ``param_dtype``. Raises ``KeyError`` naming missing tensors and
  ``ValueError`` naming the first tensor whose shape does not match.
  """
  names = getattr(checkpoint, "names", None) or frozenset(checkpoint)
  flat_names = [
    n for v in wanted.values() for n in ([v] if isinstance(v, str) else v)
  ]
  missing = [n for n in flat_names if n not in names]
  if missing:
    raise KeyError(
      f"checkpoint lacks {len(missing)} {family} tensors, e.g. {missing[:5]}"
    )
  expected = jax.eval_shape(
    model.init, jax.random.key(0), jnp.zeros((1, 2), jnp.int32)
  )["params"]
  params = {}
  for path, source in wanted.items():
    kernel = path[-1] == "kernel"
    leaf = expected
    for key in path:
      leaf = leaf[key]
    stacked = not isinstance(source, str)
    want = leaf.shape[1:] if stacked else leaf.shape
    tensors = []
    for name in source if stacked else [source]:
      t = np.asarray(checkpoint[name])
      t = t.T if kernel else t
      if t.shape != want:
        raise ValueError(
          f"checkpoint shapes do not match the config: {name} gives "
          f"{'/'.join(path)} of shape {t.shape}, the model expects {want}"
        )
      tensors.append(t)
    value = np.stack(tensors) if stacked else tensors[0]
    node = params
    for key in path[:-1]:
      node = node.setdefault(key, {})
    node[path[-1]] = low_precision.cast_weights(
      value, param_dtype, "/".join(path)
    )
  return params


def load_opt(model_dir, *, param_dtype=jnp.float32) -> tuple[OPTConfig, dict]:
  """``(config, params)`` of a Hugging Face OPT folder (``config.json`` and
  ``model.safetensors`` or a sharded index); params in ``param_dtype``."""
  config = OPTConfig.from_hf(read_hf_config(model_dir))
  checkpoint = SafetensorsCheckpoint(model_dir)
  return config, opt_params_from_hf(checkpoint, config, param_dtype=param_dtype)


# ---------------------------------------------------------------- tokenizer
def _special_token(model_dir: Path, key: str, default: str) -> str:
  for name in ("special_tokens_map.json", "tokenizer_config.json"):
    path = model_dir / name
    if path.is_file():
      token = json.loads(path.read_text()).get(key)
      if isinstance(token, dict):
        token = token.get("content")
      if token:
        return token
  return default


def load_bpe_tokenizer(model_dir, *, max_length: int | None = None):
  """A ``tokenizers.Tokenizer`` for a GPT-2 / OPT byte-level BPE vocabulary.

  From ``tokenizer.json`` when present, else from ``vocab.json`` +
  ``merges.txt`` with byte-level pre-tokenization (no prefix space) and, as
  OPT's tokenizer does, the BOS token (``</s>``, id 2) prepended to every
  sequence. Pads with ``<pad>`` (the pad token of ``special_tokens_map.json``)
  to the longest sequence; truncates to ``max_length`` if given.
  """
  from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

  model_dir = Path(model_dir)
  if (model_dir / "tokenizer.json").is_file():
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
  elif (model_dir / "vocab.json").is_file() and (
    model_dir / "merges.txt"
  ).is_file():
    tok = Tokenizer(
      models.BPE.from_file(
        str(model_dir / "vocab.json"), str(model_dir / "merges.txt")
      )
    )
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    bos = _special_token(model_dir, "bos_token", "</s>")
    bos_id = tok.token_to_id(bos)
    if bos_id is None:
      raise ValueError(f"{model_dir}: BOS token {bos!r} not in vocab.json")
    tok.post_processor = processors.TemplateProcessing(
      single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, bos_id)]
    )
    tok.add_special_tokens([bos])
  else:
    raise FileNotFoundError(
      f"{model_dir}: no tokenizer.json and no vocab.json + merges.txt; "
      f"download them from the model's page, e.g. {_example_source(model_dir)}"
    )
  pad = _special_token(model_dir, "pad_token", "<pad>")
  if tok.token_to_id(pad) is None:  # Llama / Mistral have no pad token:
    # padding is masked, so the unknown or end token serves
    for key, default in (("unk_token", "<unk>"), ("eos_token", "</s>")):
      if tok.token_to_id(_special_token(model_dir, key, default)) is not None:
        pad = _special_token(model_dir, key, default)
        break
  pad_id = tok.token_to_id(pad)
  if pad_id is None:
    raise ValueError(f"{model_dir}: pad token {pad!r} not in the vocabulary")
  tok.add_special_tokens([pad])  # already in the vocabulary: keeps its id
  tok.enable_padding(pad_id=pad_id, pad_token=pad)
  if max_length is not None:
    tok.enable_truncation(max_length)
  if (model_dir / "config.json").is_file():
    check_tokenizer_fits(tok, read_hf_config(model_dir), model_dir)
  return tok


def check_tokenizer_fits(tok, hf_config: dict, where="") -> None:
  """Refuses a tokenizer with ids the model has no embedding for.

  A model's embedding table may be larger than its tokenizer (OPT pads
  50265 tokens to 50272 rows), never smaller: an id past the table would
  be clipped or wrapped silently by the gather.
  """
  size = hf_config.get("vocab_size")
  if size is not None and tok.get_vocab_size() > int(size):
    raise ValueError(
      f"{where}: the tokenizer has {tok.get_vocab_size()} tokens but the "
      f"checkpoint's embedding has {size} rows (vocab_size in config.json): "
      "they do not belong together."
    )
