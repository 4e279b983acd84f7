"""In-memory numpy loaders for the datasets of the DPZero, DP-ZO and PAZO experiments.

Each ``load_*`` function returns :class:`DatasetSplits` ``(train, test)`` of
:class:`Dataset` ``(inputs, labels, num_classes, name, class_names)``, and raises
:class:`MissingDataError` (a ``FileNotFoundError``) naming the missing files and
how to obtain them. See ``docs/data.md``.
"""

from zoprivacy.data.loaders.amazon_polarity import (
  load_amazon_polarity,
  read_amazon_csv,
)
from zoprivacy.data.loaders.base import (
  DATA_DIR_ENV,
  Dataset,
  DatasetSplits,
  MissingDataError,
  data_root,
)
from zoprivacy.data.loaders.cifar10 import load_cifar10
from zoprivacy.data.loaders.digits import load_digits
from zoprivacy.data.loaders.fashion_mnist import load_fashion_mnist
from zoprivacy.data.loaders.glue import (
  load_mnli,
  load_rte,
  load_snli,
  load_sst2,
)
from zoprivacy.data.loaders.idx import read_idx, write_idx
from zoprivacy.data.loaders.imdb import load_imdb
from zoprivacy.data.loaders.text import (
  LABEL_WORDS,
  HashingVocab,
  Vocab,
  build_vocab,
  encode,
  mnli_prompt,
  prompts_for,
  sst2_prompt,
  tokenize,
)
from zoprivacy.data.loaders.tiny_imagenet import load_tiny_imagenet

_VADER_NAMES = ("load_vader", "load_vader_corpus", "load_vader_private_public")


def __getattr__(name):
  # Imported lazily so that `python -m zoprivacy.data.loaders.vader` does not
  # find the module already imported by the package (runpy RuntimeWarning).
  if name in _VADER_NAMES:
    from zoprivacy.data.loaders import vader

    return getattr(vader, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
  "DATA_DIR_ENV",
  "Dataset",
  "DatasetSplits",
  "MissingDataError",
  "data_root",
  "load_amazon_polarity",
  "read_amazon_csv",
  "load_cifar10",
  "load_digits",
  "load_fashion_mnist",
  "load_mnli",
  "load_rte",
  "load_snli",
  "load_sst2",
  "read_idx",
  "write_idx",
  "load_imdb",
  "LABEL_WORDS",
  "HashingVocab",
  "Vocab",
  "build_vocab",
  "encode",
  "mnli_prompt",
  "prompts_for",
  "sst2_prompt",
  "tokenize",
  "load_tiny_imagenet",
  "load_vader",
  "load_vader_corpus",
  "load_vader_private_public",
]
