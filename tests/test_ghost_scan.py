"""Ghost clipping through the layers of a stack (the causal LMs' ``nn.scan``).

The layers of a stack run through ``zoprivacy.models.stacked_layers``
(``first_order.layer_stack``) get ghost norms layer by layer: the same
norms and clipped sums as explicit per-example clipping (tolerances of
``test_ghost_clipping.assert_matches``), with no per-example copy of the
stacked layers; a layer type inside a stack that ghost clipping does not
cover falls back, and the warning names it.
"""

import functools
import warnings

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_ghost_clipping import assert_matches

from zoprivacy.estimators import base
from zoprivacy.first_order import ghost_clipping
from zoprivacy.first_order.ghost_fallback import GhostClippingFallbackWarning
from zoprivacy.models import stacked_layers
from zoprivacy.models.llama import LlamaConfig, LlamaForCausalLM
from zoprivacy.models.opt import OPTConfig, OPTForCausalLM, per_example_lm_loss
from zoprivacy.zo import queries

MASK = jnp.array([1, 1, 0, 1], bool)  # a padded row


def _lm_batch(vocab, length):
  rng = np.random.default_rng(0)
  ids = rng.integers(3, vocab, (4, length)).astype(np.int32)
  attention = np.ones_like(ids)
  attention[0, :3] = 0  # left padding in example 0
  loss_mask = np.zeros_like(ids)
  loss_mask[:, length // 2 :] = 1
  return {
    "input_ids": jnp.asarray(ids),
    "attention_mask": jnp.asarray(attention),
    "loss_mask": jnp.asarray(loss_mask),
  }


def _coverage_and_match(model, batch, clip):
  """The coverage of the model's LM loss, after checking that its ghost
  clipping equals explicit clipping (the fallback warning recorded)."""
  params = model.init(
    jax.random.key(1), batch["input_ids"], batch["attention_mask"]
  )["params"]
  loss = functools.partial(per_example_lm_loss, model=model)
  one = queries.as_per_example_loss(None, loss)
  cover = ghost_clipping.coverage(one, params, batch)
  args = base.parse_extra_args(
    {"batched_loss": loss, "batch": batch, "mask": MASK}
  )
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", GhostClippingFallbackWarning)
    _, norms = assert_matches(args, params, clip=clip)
  assert float(jnp.min(jnp.where(MASK, norms, jnp.inf))) > clip  # clipping
  said = [str(w.message) for w in caught]
  return cover, said


def test_stacked_opt_layers_get_ghost_norms_equal_to_explicit():
  """Tiny OPT, 2 stacked layers of width 8 over 10 positions: the
  attention projections form their per-example kernels (``T^2 = 100 >
  64``), the FFN takes ghost norms (``100 <= 8 x 32``), the LayerNorms
  their own per-example gradients; only the tied embedding (also read by
  the LM head) falls back, and the warning says so."""
  config = OPTConfig(
    vocab_size=40,
    hidden_size=8,
    num_hidden_layers=2,
    ffn_dim=32,
    num_attention_heads=2,
    max_position_embeddings=16,
  )
  cover, said = _coverage_and_match(
    OPTForCausalLM(config), _lm_batch(40, 10), clip=0.05
  )
  layers = {k: v for k, v in cover.items() if k.startswith("['layers']")}
  assert len(layers) == 16
  assert all(
    v == ("local" if "layer_norm" in k else "dense") for k, v in layers.items()
  ), layers
  assert cover["['embed_positions']['embedding']"] == "embed"
  assert cover["['embed_tokens']['embedding']"] == "per_example"
  (text,) = said
  assert "['embed_tokens']['embedding']" in text and "['layers']" not in text


# Llama's stack (9 s on 2 cores) in CI's slow step, as the other Llama
# variants of the LLM equivalences: OPT's stack checks the scanned ghost
# norms here.
@pytest.mark.slow
def test_stacked_llama_layers_get_ghost_norms_equal_to_explicit():
  """Tiny Llama (grouped-query attention, SwiGLU, an untied head): every
  projection of the stack takes ghost norms; its RMSNorm (a module of its
  own, not ``nn.RMSNorm``) and the head (read by vocabulary chunks) fall
  back, named."""
  config = LlamaConfig(
    vocab_size=40,
    hidden_size=16,
    intermediate_size=24,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=32,
  )
  cover, said = _coverage_and_match(
    LlamaForCausalLM(config), _lm_batch(40, 8), clip=0.05
  )
  dense = [k for k, v in cover.items() if "['kernel']" in k and "layers" in k]
  assert len(dense) == 7 and all(cover[k] == "dense" for k in dense)
  assert cover["['layers']['input_layernorm']['scale']"] == "per_example"
  assert cover["['embed_tokens']['embedding']"] == "embed"
  (text,) = said
  assert "['layers']['input_layernorm']['scale']" in text
  assert "['lm_head']['kernel']" in text


class _Layer(nn.Module):
  """A layer with a type ghost clipping does not cover (``DenseGeneral``)
  between two that it does."""

  @nn.compact
  def __call__(self, x, cache):
    h = nn.tanh(nn.Dense(6, name="up")(x))
    h = nn.DenseGeneral(6, name="mix")(h)
    return x + nn.Dense(4, name="down")(h), cache


class _Stacked(nn.Module):
  def setup(self):
    self.layers = nn.scan(
      _Layer,
      variable_axes={"params": 0},
      split_rngs={"params": True},
      length=3,
    )()
    self.head = nn.Dense(3)

  def __call__(self, x):
    layer = _Layer(parent=None)
    x, _ = stacked_layers.scan_layers(self.layers, layer, x, None)
    return self.head(x.mean(axis=-2))


def test_an_uncovered_layer_type_inside_a_stack_falls_back_and_is_named():
  model = _Stacked()
  x = jax.random.normal(jax.random.key(2), (4, 5, 4))
  labels = jnp.array([0, 1, 2, 0])
  params = model.init(jax.random.key(0), x[:1])["params"]

  def per_example_loss(params, example):
    logits = model.apply({"params": params}, example[0][None])[0]
    return -jax.nn.log_softmax(logits)[example[1]]

  args = base.parse_extra_args(
    {"per_example_loss": per_example_loss, "batch": (x, labels), "mask": MASK}
  )
  cover = ghost_clipping.coverage(per_example_loss, params, args.batch)
  assert cover["['layers']['mix']['kernel']"] == "per_example"
  assert cover["['layers']['up']['kernel']"] == "dense"
  assert cover["['layers']['down']['bias']"] == "dense"
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", GhostClippingFallbackWarning)
    assert_matches(args, params, clip=0.1)
  (text,) = [str(w.message) for w in caught]
  assert "['layers']['mix']['bias'], ['layers']['mix']['kernel']" in text
  assert "['layers']['up']" not in text
