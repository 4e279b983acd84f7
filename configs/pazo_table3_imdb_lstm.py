"""PAZO Table 3: an LSTM trained from scratch on IMDB, DPZero row, eps = 2.

Setting (PAZO App. C.1): IMDB (25,000 training reviews, private), a
vocabulary of 10K tokens, 2,000 Amazon Polarity reviews (4% of IMDB's
training size) as out-of-distribution public data encoded with the same
vocabulary; delta = 1/#train. The paper's vocabulary is the 10K most
frequent IMDB *training* tokens, a release of the private data that no
epsilon covers; here it is the 10K most frequent tokens of 25,000 public
Amazon Polarity reviews (the first rows of its train.csv, unlabelled text,
the size of IMDB's training set), the same construction on public data
(``vocab="hash"``: the hashing trick, for runs without Amazon Polarity).
The LSTM's sizes (embedding 100, one layer of 128 units) and the 256-token
truncation are this library's choices (the paper gives neither). Hyper-parameters: smoothing 1e-2 (Table 7), q = 5
(Table 8), 200 epochs at batch 64 (App. C.3) = 78,125 steps; C = 1 and step
size 0.02 are points of the Table 10 grids (C in {0.1, ..., 2}, step size in
{0.002, ..., 0.1}); the selected points are not reported.

Needs ``aclImdb`` and ``amazon_review_polarity_csv`` under ``data_dir``:

  python -m experiments.run --config configs/pazo_table3_imdb_lstm.py \
      --config.data_dir=/data
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
  config = default.get_config()
  config.dataset = "imdb"
  config.model = "lstm"
  config.model_kwargs = ml_collections.ConfigDict(
    {"embed_dim": 100, "hidden_size": 128, "num_layers": 1}
  )
  config.vocab = "amazon"  # public text only; "hash": no data
  config.vocab_size = 10_000
  config.vocab_corpus_size = 25_000
  config.max_length = 256
  config.public = "amazon"
  config.public_size = 2000
  config.eval_split = "test"
  config.validation_size = 1000

  config.estimator = "dpzero"
  config.estimator_kwargs = ml_collections.ConfigDict(
    {
      "smoothing": 1e-2,
      "directions": "gaussian",
    }
  )
  config.privacy.clip = 1.0
  config.privacy.num_queries = 5
  config.optimizer = "sgd"
  config.learning_rate = 0.02
  config.privacy.expected_batch_size = 64
  config.num_steps = 78_125  # 200 epochs of 25,000 reviews
  config.privacy.target_epsilon = 2.0
  config.privacy.delta = 1.0 / 25_000
  config.eval_every = 5_000
  config.checkpoint_every = 5_000
  return config
