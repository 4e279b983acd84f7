"""A fine-tuned causal LM written back as a Hugging Face checkpoint folder.

The inverse of the loaders (:mod:`zoprivacy.models.hf_checkpoint` for OPT,
:mod:`zoprivacy.models.hf_llama` for Llama and Mistral, and through them the
GGUF loader): the same name mapping, read backwards. Each Flax leaf becomes
its Hugging Face tensors, kernels ``[in, out]`` transposed to ``torch``'s
``[out, in]``, a stacked ``[L, ...]`` leaf split into its ``L`` per-layer
tensors; a tied LM head is not written. The folder holds
``model.safetensors`` (or shards of at most ``shard_bytes`` with
``model.safetensors.index.json``, as ``save_pretrained`` writes them) and
``config.json`` (``architectures``, ``model_type`` and the configuration's
fields under their Hugging Face names), and ``tokenizer.json`` when the
tokenizer is given. transformers, vLLM and the project's own loaders read it.

Layout. Weights are written in Hugging Face's layout, whatever they were
read from: a GGUF file's query and key rows, which llama.cpp permutes to its
interleaved rotary pairs, were un-permuted when the model was loaded
(:func:`zoprivacy.models.gguf_checkpoint.unpermute_rotary`), so they are
written as they are (llama.cpp's ``convert_hf_to_gguf.py`` converts the
folder back to GGUF).

LoRA. Adapters (:class:`~zoprivacy.models.peft.StackedLoRA`, ``W + (alpha /
r) A B`` on ``[in, out]`` kernels) are either merged into the weights
(:func:`save_model` of the merged parameters) or written in PEFT's adapter
format (:func:`save_adapter`): ``adapter_config.json`` (``peft_type``
``LORA``, ``r``, ``lora_alpha``, the adapted modules by their full names)
and ``adapter_model.safetensors`` with ``base_model.model.<module>.lora_A.
weight`` ``[r, in]`` (``A^T``) and ``lora_B.weight`` ``[out, r]``
(``B^T``), so that PEFT's ``W + (lora_alpha / r) B_hf A_hf`` is the merged
weight.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from flax import traverse_util

from zoprivacy.models import peft
from zoprivacy.models.hf_checkpoint import (
  INDEX_FILE,
  SINGLE_FILE,
  opt_tensor_names,
)
from zoprivacy.models.hf_llama import llama_tensor_names
from zoprivacy.models.llama import LlamaConfig
from zoprivacy.models.opt import OPTConfig

DTYPES = {"float32": np.float32, "bfloat16": jax.numpy.bfloat16}
DTYPES["float16"] = np.float16
SHARD_BYTES = 5 * 10**9  # save_pretrained's default max_shard_size, "5GB"
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_FILE = "adapter_model.safetensors"
_ARCHITECTURES = {
  "opt": "OPTForCausalLM",
  "llama": "LlamaForCausalLM",
  "mistral": "MistralForCausalLM",
}
# Fields of the Flax configurations that are not Hugging Face's.
_NOT_HF = ("num_prefix_tokens", "remove_final_layer_norm")


class Adapters(NamedTuple):
  """LoRA adapters as a run trained them: ``adapters`` holds ``lora_A`` /
  ``lora_B`` leaves beside the model's stacked kernels' paths, for the
  layers ``first_layer, first_layer + 1, ...`` of the model (the top
  blocks of a split model; 0 for all of them)."""

  lora: peft.LoRA
  adapters: dict
  first_layer: int = 0


class Exportable(NamedTuple):
  """What a fine-tuning run exports: the model's configuration, its full
  parameters with any adapters merged, and for a LoRA run the frozen base
  parameters and the adapters; the tokenizer (a ``tokenizers.Tokenizer``)
  when known."""

  config: OPTConfig | LlamaConfig
  params: dict
  base: dict | None = None
  adapters: Adapters | None = None
  tokenizer: Any = None


def tensor_names(config) -> dict:
  """``{flax path: HF name, or the per-layer names}`` of the model."""
  if isinstance(config, OPTConfig):
    return opt_tensor_names(config, "model.decoder.")
  return llama_tensor_names(config)


def _leaf(params, path):
  for key in path:
    params = params[key]
  return params


class _Tensor(NamedTuple):
  """One HF tensor of the parameters: its name, the Flax leaf's path and
  layer (None for an unstacked leaf), and its size when written."""

  name: str
  path: tuple
  layer: int | None
  nbytes: int


def _plan(params: dict, config, dtype: str) -> list[_Tensor]:
  itemsize = np.dtype(DTYPES[dtype]).itemsize
  plan = []
  for path, names in tensor_names(config).items():
    shape = np.shape(_leaf(params, path))
    if isinstance(names, str):
      plan.append(_Tensor(names, path, None, math.prod(shape) * itemsize))
      continue
    size = math.prod(shape[1:]) * itemsize
    plan += [_Tensor(n, path, j, size) for j, n in enumerate(names)]
  return plan


def _value(params: dict, tensor: _Tensor, dtype: str) -> np.ndarray:
  """The HF tensor ``tensor`` (one layer of a stacked leaf is copied from
  the device, not the stack)."""
  value = _leaf(params, tensor.path)
  if tensor.layer is not None:
    value = value[tensor.layer]
  value = np.asarray(jax.device_get(value)).astype(DTYPES[dtype])
  value = value.T if tensor.path[-1] == "kernel" else value
  return np.ascontiguousarray(value)


def hf_tensors(params: dict, config, dtype="float32") -> dict:
  """``{HF name: array}`` of the parameters (the whole checkpoint in host
  memory: :func:`save_model` writes one shard at a time)."""
  return {
    t.name: _value(params, t, dtype) for t in _plan(params, config, dtype)
  }


def hf_config(config, dtype="float32") -> dict:
  """``config.json`` of ``config`` (an :class:`OPTConfig` or
  :class:`LlamaConfig`), its weights stored in ``dtype``."""
  if config.num_prefix_tokens:
    raise ValueError(
      "a prefix-tuned model has no Hugging Face model format (its prefix "
      "keys and values are no weights of the model); export the base model."
    )
  fields = {k: v for k, v in _fields(config).items() if k not in _NOT_HF}
  model_type = "opt" if isinstance(config, OPTConfig) else config.model_type
  fields.update(
    architectures=[_ARCHITECTURES[model_type]],
    model_type=model_type,
    torch_dtype=dtype,
  )
  if model_type == "opt":
    fields["_remove_final_layer_norm"] = config.remove_final_layer_norm
    fields["tie_word_embeddings"] = True
  else:
    fields.update(hidden_act="silu", attention_bias=False, mlp_bias=False)
  return fields


def _fields(config) -> dict:
  return {k: getattr(config, k) for k in config.__dataclass_fields__}


def _shards(plan: list[_Tensor], shard_bytes: int) -> list[list[_Tensor]]:
  """Consecutive groups of at most ``shard_bytes`` each (a larger tensor
  alone)."""
  groups, size = [[]], 0
  for tensor in plan:
    if groups[-1] and size + tensor.nbytes > shard_bytes:
      groups.append([])
      size = 0
    groups[-1].append(tensor)
    size += tensor.nbytes
  return groups


def _write(path: Path, tensors: dict) -> None:
  from safetensors.numpy import save_file  # optional dependency (text extra)

  save_file(tensors, str(path), metadata={"format": "pt"})


def save_model(
  out_dir, params: dict, config, *, dtype="float32", shard_bytes=SHARD_BYTES
) -> list[Path]:
  """Writes ``params`` of ``config``'s model as a Hugging Face folder
  (module docstring), one shard in host memory at a time; returns the
  files written."""
  out = Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  (out / "config.json").write_text(
    json.dumps(hf_config(config, dtype), indent=2, sort_keys=True) + "\n"
  )
  plan = _plan(params, config, dtype)
  groups = _shards(plan, shard_bytes)
  names = (
    [SINGLE_FILE]
    if len(groups) == 1
    else [
      f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
      for i in range(len(groups))
    ]
  )
  for name, group in zip(names, groups):
    _write(out / name, {t.name: _value(params, t, dtype) for t in group})
  written = [out / "config.json"] + [out / n for n in names]
  if len(groups) > 1:
    index = {
      "metadata": {"total_size": sum(t.nbytes for t in plan)},
      "weight_map": {t.name: n for n, g in zip(names, groups) for t in g},
    }
    (out / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
    written.append(out / INDEX_FILE)
  return written


def adapter_tensors(adapters: Adapters, config, dtype="float32") -> dict:
  """``{PEFT tensor name: array}`` of the adapters (module docstring)."""
  names = tensor_names(config)
  flat = traverse_util.flatten_dict(adapters.adapters)
  out = {}
  for path in sorted({k[:-1] for k in flat}):
    per_layer = names[path + ("kernel",)]
    a, b = (np.asarray(flat[path + (n,)]) for n in ("lora_A", "lora_B"))
    for j in range(a.shape[0]):
      module = per_layer[adapters.first_layer + j].removesuffix(".weight")
      prefix = f"base_model.model.{module}"
      out[f"{prefix}.lora_A.weight"] = a[j].T.astype(DTYPES[dtype])
      out[f"{prefix}.lora_B.weight"] = b[j].T.astype(DTYPES[dtype])
  return {k: np.ascontiguousarray(v) for k, v in out.items()}


def save_adapter(
  out_dir, adapters: Adapters, config, *, base_model="", dtype="float32"
) -> list[Path]:
  """Writes the LoRA ``adapters`` in PEFT's format (module docstring);
  ``base_model``: the base checkpoint's name or path, recorded in
  ``adapter_config.json``."""
  out = Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  tensors = adapter_tensors(adapters, config, dtype)
  modules = sorted(
    {n.split(".lora_")[0][len("base_model.model.") :] for n in tensors}
  )
  lora = adapters.lora
  settings = {
    "peft_type": "LORA",
    "task_type": "CAUSAL_LM",
    "base_model_name_or_path": str(base_model),
    "r": lora.rank,
    "lora_alpha": lora.rank if lora.alpha is None else lora.alpha,
    "target_modules": modules,
    "lora_dropout": 0.0,
    "bias": "none",
    "fan_in_fan_out": False,
    "use_rslora": False,
    "inference_mode": True,
  }
  (out / ADAPTER_CONFIG).write_text(json.dumps(settings, indent=2) + "\n")
  _write(out / ADAPTER_FILE, tensors)
  return [out / ADAPTER_CONFIG, out / ADAPTER_FILE]


def save_tokenizer(out_dir, tokenizer) -> Path:
  """``tokenizer.json`` of a ``tokenizers.Tokenizer``, without the padding
  and truncation a task set on it."""
  from tokenizers import Tokenizer  # optional dependency (text extra)

  copy = Tokenizer.from_str(tokenizer.to_str())
  copy.no_padding()
  copy.no_truncation()
  path = Path(out_dir) / "tokenizer.json"
  copy.save(str(path))
  return path
