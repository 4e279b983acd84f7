"""LSTM text classifier.

PAZO setting (3): an LSTM trained from scratch on IMDB (10K-word vocabulary,
:mod:`zoprivacy.data.loaders.text`), with Amazon Polarity as public data. The
paper does not give the layer sizes; the defaults (embedding 100, one layer of
128 units) are this library's choice and are constructor arguments.

Input: ``[..., L]`` int token ids (0 = padding) and optional ``[...]`` lengths;
the classifier reads the hidden state at each sequence's last valid token
(padding after it cannot change the output). Each example is processed
independently, and the module works under ``jax.vmap`` over examples.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp


class LSTMClassifier(nn.Module):
  vocab_size: int
  num_classes: int = 2
  embed_dim: int = 100
  hidden_size: int = 128
  num_layers: int = 1

  @nn.compact
  def __call__(self, tokens, lengths: jnp.ndarray | None = None):
    batch_shape = tokens.shape[:-1]
    tokens = tokens.reshape((-1, tokens.shape[-1]))
    if lengths is None:
      lengths = jnp.sum(tokens != 0, axis=-1)
    lengths = jnp.maximum(jnp.reshape(lengths, (-1,)), 1).astype(jnp.int32)
    x = nn.Embed(self.vocab_size, self.embed_dim, name="embed")(tokens)
    carry = None
    for i in range(self.num_layers):
      cell = nn.OptimizedLSTMCell(self.hidden_size, name=f"lstm{i}")
      carry, x = nn.RNN(cell, return_carry=True)(x, seq_lengths=lengths)
    _, h_last = carry  # (c, h) frozen after each sequence's last valid step
    logits = nn.Dense(self.num_classes, name="head")(h_last)
    return logits.reshape(batch_shape + (self.num_classes,))
