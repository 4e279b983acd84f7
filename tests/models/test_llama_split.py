"""The split Llama of prompt classification (a trunk computed once, the
top blocks trained, label-word logits at the last position) computes the
full model's next-token logits at the label words."""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoprivacy.models import llama_split
from zoprivacy.models.hf_llama import load_llama
from zoprivacy.models.llama import LlamaForCausalLM
from zoprivacy.models.prefix_tuning import PrefixTuning

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures"
LABELS = np.array([7, 11, 3])


def _left_padded(vocab, rng):
  lengths = [9, 4, 12, 1]
  ids = np.zeros((len(lengths), 12), np.int32)
  mask = np.zeros_like(ids)
  for row, n in enumerate(lengths):
    ids[row, 12 - n :] = rng.integers(3, vocab, n)
    mask[row, 12 - n :] = 1
  return ids, mask


def _reference(config, params, ids, mask):
  """The full model's logits at each row's last position, label words."""
  logits = LlamaForCausalLM(config).apply(
    {"params": params}, jnp.asarray(ids), jnp.asarray(mask)
  )
  return np.asarray(logits)[:, -1][:, LABELS]


@pytest.mark.parametrize("name", ["tiny_llama", "tiny_mistral"])
@pytest.mark.parametrize("trained", [1, 2])
def test_split_model_equals_the_full_model(name, trained):
  """Untied (tiny_llama) and tied (tiny_mistral) heads; the precomputed
  trunk by length buckets; every block trained (trunk = embedding) and
  one."""
  config, params = load_llama(FIXTURES / name)
  trained = min(trained, config.num_hidden_layers)
  ids, mask = _left_padded(config.vocab_size, np.random.default_rng(0))
  trunk, top = llama_split.split_params(params, config, trained)
  states = llama_split.precompute_states(
    trunk, config, ids, mask, batch_size=2, multiple=4
  )
  assert states.dtype == np.float32 and np.all(states[mask == 0] == 0)
  rows = llama_split.label_rows(params, config, LABELS)
  got = llama_split.label_logits(top, config, states, mask, rows)
  want = _reference(config, params, ids, mask)
  np.testing.assert_allclose(np.asarray(got), want, atol=2e-5, rtol=1e-5)


def test_all_blocks_trained_starts_from_the_embedding():
  config, params = load_llama(FIXTURES / "tiny_llama")
  k = config.num_hidden_layers
  ids, mask = _left_padded(config.vocab_size, np.random.default_rng(1))
  trunk, top = llama_split.split_params(params, config, k)
  states = llama_split.precompute_states(trunk, config, ids, mask)
  table = np.asarray(params["embed_tokens"]["embedding"])
  np.testing.assert_array_equal(states, table[ids] * mask[..., None])
  rows = llama_split.label_rows(params, config, LABELS)
  got = llama_split.label_logits(top, config, states, mask, rows)
  np.testing.assert_allclose(
    np.asarray(got), _reference(config, params, ids, mask), atol=2e-5
  )


def test_prefix_tuning_equals_the_full_prefix_model():
  """With prefix adapters in every block (all blocks trained), the split
  model's logits are the full prefix model's: the last block's hand-written
  last-query attention reads the prefix as ``LlamaAttention`` does."""
  config, params = load_llama(FIXTURES / "tiny_llama")
  ids, mask = _left_padded(config.vocab_size, np.random.default_rng(2))
  prefix = PrefixTuning(num_tokens=3)
  adapters = prefix.init(jax.random.key(0), params, config=config)
  adapters = jax.tree.map(lambda a: a * 1.5, adapters)  # not the init's
  cfg = prefix.model_config(config)
  k = config.num_hidden_layers
  trunk, top = llama_split.split_params(params, config, k)
  states = llama_split.precompute_states(trunk, config, ids, mask)
  rows = llama_split.label_rows(params, config, LABELS)
  got = llama_split.label_logits(
    prefix.merge(top, adapters), cfg, states, mask, rows
  )
  full = LlamaForCausalLM(cfg).apply(
    {"params": prefix.merge(params, adapters)},
    jnp.asarray(ids),
    jnp.asarray(mask),
  )
  want = np.asarray(full)[:, -1][:, LABELS]
  np.testing.assert_allclose(np.asarray(got), want, atol=2e-5, rtol=1e-5)
  plain = llama_split.label_logits(top, config, states, mask, rows)
  assert not np.allclose(np.asarray(plain), want, atol=1e-3)


def test_trained_blocks_out_of_range_is_refused():
  config, params = load_llama(FIXTURES / "tiny_llama")
  with pytest.raises(ValueError, match="train between 1 and"):
    llama_split.split_params(params, config, 0)
  with pytest.raises(ValueError, match="train between 1 and"):
    llama_split.split_params(params, config, config.num_hidden_layers + 1)
