"""The LM head's NLL by vocabulary chunks equals ``-log_softmax`` of the
full logits (float32 rounding), including the overlapping last chunk, and
the LM losses that use it equal the full-logits losses."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoprivacy.models import chunked_head
from zoprivacy.models.llama import LlamaConfig, LlamaForCausalLM
from zoprivacy.models.opt import OPTConfig, OPTForCausalLM, per_example_lm_loss


def _reference(hidden, weights, targets):
  logits = hidden.astype(np.float64) @ weights.astype(np.float64).T
  top = logits.max(-1, keepdims=True)
  lse = top[..., 0] + np.log(np.exp(logits - top).sum(-1))
  return lse - np.take_along_axis(logits, targets[..., None], -1)[..., 0]


@pytest.mark.parametrize("chunk", [7, 16, 50, 64])  # 50 = V; 64 > V
def test_chunked_nll_equals_log_softmax(chunk):
  rng = np.random.default_rng(0)
  vocab, dim = 50, 12
  hidden = rng.normal(size=(3, 5, dim)).astype(np.float32)
  table = (4 * rng.normal(size=(vocab, dim))).astype(np.float32)  # peaked
  # Every target class of the overlapping last chunk (43..49 for C=7 is
  # counted by chunk 6, 42..48 by chunk 7), the first and the last id.
  targets = np.array([[0, 49, 42, 43, 48], [7, 6, 13, 14, 21], [1, 2, 3, 4, 5]])
  got = chunked_head.chunked_nll(
    hidden, targets, chunked_head.table_rows(table), vocab, chunk
  )
  want = _reference(hidden, table, targets)
  assert got.shape == targets.shape and got.dtype == jnp.float32
  np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-5)
  # The untied layout: a [D, V] kernel gives the same values.
  kernel_nll = chunked_head.chunked_nll(
    hidden, targets, chunked_head.kernel_rows(table.T), vocab, chunk
  )
  # The [D, V] layout sums in another order: float32 rounding only (the
  # CPU's vector width changes the order; a wrong row would be off by ~1).
  np.testing.assert_allclose(kernel_nll, got, rtol=2e-6, atol=2e-5)


def test_chunked_nll_is_stable_for_large_logits():
  """Logits near 1e4 (exp overflows float32) still give finite NLLs."""
  hidden = np.full((2, 4), 50.0, np.float32)
  table = np.linspace(-50, 50, 40, dtype=np.float32)[:, None] * np.ones(
    (1, 4), np.float32
  )
  targets = np.array([39, 0])
  got = chunked_head.chunked_nll(
    hidden, targets, chunked_head.table_rows(table), 40, 8
  )
  np.testing.assert_allclose(got, _reference(hidden, table, targets), rtol=1e-5)
  assert np.isfinite(got).all()


def _batch(vocab, batch_size=3, length=10):
  rng = np.random.default_rng(1)
  ids = rng.integers(1, vocab, size=(batch_size, length)).astype(np.int32)
  attention = np.ones_like(ids)
  attention[0, -3:] = 0
  loss_mask = np.zeros_like(ids)
  loss_mask[:, 6:9] = 1
  return {"input_ids": ids, "attention_mask": attention, "loss_mask": loss_mask}


@pytest.mark.parametrize(
  "family", ["opt", pytest.param("llama-untied", marks=pytest.mark.slow)]
)
def test_lm_losses_by_chunks_equal_the_full_logits(family):
  if family == "opt":
    config = OPTConfig(
      vocab_size=70,
      hidden_size=16,
      num_hidden_layers=1,
      ffn_dim=32,
      num_attention_heads=2,
      max_position_embeddings=16,
    )
    model = OPTForCausalLM(config)
  else:
    config = LlamaConfig(
      vocab_size=70,
      hidden_size=16,
      intermediate_size=32,
      num_hidden_layers=1,
      num_attention_heads=2,
      num_key_value_heads=1,
      max_position_embeddings=16,
      tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
  batch = _batch(70)
  params = model.init(jax.random.key(0), batch["input_ids"])["params"]
  for window in (None, 4):
    loss = functools.partial(
      per_example_lm_loss, model=model, answer_window=window
    )
    full = jax.jit(functools.partial(loss, vocab_chunk=None))(params, batch)
    chunked = jax.jit(functools.partial(loss, vocab_chunk=16))(params, batch)
    np.testing.assert_allclose(chunked, full, rtol=2e-6)
    assert np.all(np.asarray(full) > 0)
