"""IMDB with an LSTM from scratch (PAZO Table 3), Amazon Polarity as public data."""

from __future__ import annotations

from experiments.tasks.common import (
  data_seed,
  flax_task,
  model_kwargs,
  train_eval_split,
)
from experiments.tasks.registry import Task, register
from zoprivacy.data import loaders
from zoprivacy.data import splits as splits_lib
from zoprivacy.models import lstm


@register("imdb")
def imdb_task(config) -> Task:
  """PAZO Table 3: an LSTM from scratch on IMDB.

  The vocabulary is the ``vocab_size`` (10K) most frequent tokens of the
  *training* texts that the task trains on; test and public texts are encoded
  with it. ``max_length`` (default 256) tokens per review, truncated at the end.
  ``public="amazon"``: ``public_size`` (2,000 = 4% of IMDB's 25,000 training
  reviews) Amazon Polarity reviews, sampled in one streaming pass.
  """
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
      data_seed(config),
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
