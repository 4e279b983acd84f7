"""IMDB with an LSTM from scratch (PAZO Table 3), Amazon Polarity as public data.

The word vocabulary is a function of public data only (``config.vocab``):

* ``"amazon"`` (default): the ``vocab_size`` (10K) most frequent tokens of
  the first ``vocab_corpus_size`` (25,000, IMDB's training size) reviews of
  Amazon Polarity's ``train.csv``, read as unlabelled text. The same
  construction as PAZO's, on the setting's public corpus.
* ``"hash"``: the hashing trick (:class:`~zoprivacy.data.loaders.HashingVocab`),
  ``vocab_size`` buckets and no data at all; for runs without Amazon
  Polarity on disk.

PAZO takes the top 10K tokens of IMDB's *training* texts. That vocabulary
is not offered: it releases which words the private reviews contain, which
no epsilon accounts for, and it makes every review's encoding depend on the
other reviews (adding one review with a new frequent word renumbers all
the others), so neighbouring training sets would not stay neighbouring.
"""

from __future__ import annotations

from experiments.tasks.common import (
  EVAL_FIELDS,
  data_seed,
  flax_task,
  model_kwargs,
  public_set_builder,
  train_eval_split,
)
from experiments.tasks.registry import register
from experiments.tasks.task import Task
from zoprivacy.data import loaders
from zoprivacy.data import splits as splits_lib
from zoprivacy.data.loaders import amazon_polarity
from zoprivacy.models import lstm

VOCAB_SOURCES = ("amazon", "hash")
VOCAB_CORPUS_SIZE = 25_000


def _amazon_root(data_dir, why: str):
  """Amazon Polarity's folder; missing, the error says what needs it."""
  try:
    return amazon_polarity.amazon_polarity_dir(data_dir)
  except loaders.MissingDataError as e:
    raise loaders.MissingDataError(
      e.dataset, e.missing, f"{e.instructions}. {why}"
    ) from None


def public_vocabulary(config):
  """The task's vocabulary (module docstring): never reads IMDB."""
  size = int(config.get("vocab_size") or 10_000)
  source = config.get("vocab") or "amazon"
  if size < 1:
    raise ValueError(f"vocab_size must be >= 1, got {size}")
  if source not in VOCAB_SOURCES:
    raise ValueError(
      f"vocab={source!r} is not a vocabulary of the imdb task. Use "
      "'amazon' (the default: the vocab_size most frequent words of "
      "vocab_corpus_size public Amazon Polarity reviews) or 'hash' (the "
      "hashing trick, no data). A vocabulary of the IMDB training texts is "
      "not offered: it would release which words the private reviews "
      "contain, outside the privacy accounting."
    )
  if source == "hash":
    return loaders.HashingVocab(size)
  root = _amazon_root(
    config.get("data_dir") or None,
    "The imdb task builds its vocabulary from this public text; without "
    "it, set vocab='hash' (--config.vocab=hash: the hashing trick, no data).",
  )
  corpus = loaders.read_amazon_csv(
    root / "train.csv",
    head=int(config.get("vocab_corpus_size") or VOCAB_CORPUS_SIZE),
    name="amazon_polarity/vocabulary",
  )
  return loaders.build_vocab(corpus.inputs, max_size=size)


@public_set_builder
def imdb_public(config, pool):
  """``(private, public)``: ``public_size`` Amazon Polarity reviews (one
  streaming pass; a function of the public file and the data seed alone)
  and ``pool`` without any review that duplicates one of them; ``public``
  None without ``config.public``."""
  if not config.get("public"):
    return pool, None
  if config.public != "amazon":
    raise ValueError(f"public={config.public!r} for imdb; use 'amazon' or ''")
  root = _amazon_root(
    config.get("data_dir") or None, "public='amazon' reads it"
  )
  public = loaders.read_amazon_csv(
    root / "train.csv",
    int(config.get("public_size") or 2000),
    data_seed(config),
    name="amazon_polarity/public",
  )
  return splits_lib.exclude_public(pool, public, "drop"), public


@register(
  "imdb",
  fields=(
    "public_size",
    "vocab",
    "vocab_size",
    "vocab_corpus_size",
    "max_length",
    *EVAL_FIELDS,
  ),
  public_splits=("amazon",),
)
def imdb_task(config) -> Task:
  """PAZO Table 3: an LSTM from scratch on IMDB.

  Texts are encoded one by one with :func:`public_vocabulary`,
  ``max_length`` (default 256) tokens per review, truncated at the end.
  ``public="amazon"``: ``public_size`` (2,000 = 4% of IMDB's 25,000 training
  reviews) Amazon Polarity reviews, sampled in one streaming pass
  (:func:`imdb_public`).
  """
  data = loaders.load_imdb(config.get("data_dir") or None)
  vocab = public_vocabulary(config)
  pool, public = imdb_public(config, data.train)
  train, test = train_eval_split(config, pool, data.test)
  max_length = int(config.get("max_length") or 256)

  def encode(ds):
    tokens, lengths = loaders.encode(list(ds.inputs), vocab, max_length)
    return {"tokens": tokens, "lengths": lengths}

  model = lstm.LSTMClassifier(
    vocab_size=len(vocab),
    num_classes=2,
    **model_kwargs(config, lstm.LSTMClassifier),
  )
  return flax_task(
    model,
    train,
    test,
    public,
    encode,
    call=lambda m, p, x: m.apply(p, x["tokens"], x["lengths"]),
  )
