"""The causal LMs' own forward pass (flax ``nn.scan``: evaluation and every
step that is not layer-wise) with bfloat16 stored weights: no float32 copy
of a layer stack, of the token embedding or of the LM head
(:mod:`zoprivacy.models.stacked_layers`), and the same values as the
float32 model on the same (bfloat16-representable) weights.

Compile only for the memory: a 24-layer model of width 64 (as many layers
as opt-1.3b, so one layer's float32 copy is as small a share of the stack
as there), batch 2 x 32. Measured (XLA:CPU): OPT 4.97 MiB float32 against
2.74 MiB bfloat16, 0.55x (7.33 MiB, 1.47x, with flax's scan slicing the
bfloat16 stacks); Llama with an untied head 0.55x (1.45x before). At the
real shapes, batch 8 x 256: opt-125m 0.56x (1.17x before), opt-1.3b
(slow, tests/benchmarks/test_llm_memory.py).
"""

import functools
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoprivacy.models.hf_llama import load_llama
from zoprivacy.models.llama import LlamaConfig, LlamaForCausalLM
from zoprivacy.models.opt import OPTConfig, OPTForCausalLM, per_example_lm_loss
from zoprivacy.models.opt_generate import generate

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "benchmarks"))
import llm_memory_bf16  # noqa: E402

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures"
FORWARD = llm_memory_bf16.PRECISION_ROWS[0]  # the model's own nn.scan forward
MAX_RATIO = 0.6
DEEP_OPT = OPTConfig(
  vocab_size=512,
  hidden_size=64,
  num_hidden_layers=24,
  ffn_dim=256,
  num_attention_heads=4,
  max_position_embeddings=64,
)
DEEP_LLAMA = LlamaConfig(
  vocab_size=512,
  hidden_size=64,
  intermediate_size=192,
  num_hidden_layers=24,
  num_attention_heads=4,
  num_key_value_heads=2,
  max_position_embeddings=64,
)


def _ratio(config):
  result = llm_memory_bf16.measure_precision(config, 2, 32, rows=(FORWARD,))
  (f32, _), (bf16, stacks) = (
    result["float32"][FORWARD],
    result["bfloat16"][FORWARD],
  )
  return bf16 / f32, stacks


def test_opt_bf16_forward_is_at_most_0_6_of_float32():
  ratio, stacks = _ratio(DEEP_OPT)
  assert stacks == 0, f"{stacks} float32 layer stacks outside the loop"
  assert ratio <= MAX_RATIO, ratio


def test_llama_bf16_forward_is_at_most_0_6_of_float32():
  ratio, stacks = _ratio(DEEP_LLAMA)
  assert stacks == 0, f"{stacks} float32 layer stacks outside the loop"
  assert ratio <= MAX_RATIO, ratio


def _as_bf16(params):
  """``(bfloat16 params, the same values in float32)``."""
  bf16 = jax.tree.map(lambda x: x.astype(jnp.bfloat16), params)
  return bf16, jax.tree.map(lambda x: x.astype(jnp.float32), bf16)


def _close_gradients(got, want):
  """The bfloat16 gradient within 2**-7 of the float32 gradient's largest
  entry, leaf by leaf (bfloat16 rounding of the cotangents; a slice taken
  as bits without its derivative gives 0, a 100% error)."""
  scale = max(float(np.max(np.abs(w))) for w in jax.tree.leaves(want))
  for (path, g), w in zip(
    jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(want)
  ):
    assert g.dtype == jnp.bfloat16, path
    np.testing.assert_allclose(
      np.asarray(g, np.float32), w, atol=2**-7 * scale, err_msg=str(path)
    )


def _same_function(model, params, ids, mask, decode=True):
  """Logits, the chunked loss, its gradient and (``decode``) greedy
  decoding with the key/value cache of ``model`` at bfloat16 weights equal
  the float32 weights' with the same values (the gradient to bfloat16
  rounding)."""
  bf16, as32 = _as_bf16(params)
  logits = jax.jit(lambda p: model.apply({"params": p}, ids, mask))
  np.testing.assert_allclose(logits(bf16), logits(as32), rtol=1e-5, atol=1e-5)
  batch = dict(input_ids=ids, attention_mask=mask, loss_mask=mask)
  loss = jax.jit(functools.partial(per_example_lm_loss, model=model))
  np.testing.assert_allclose(loss(bf16, batch), loss(as32, batch), rtol=1e-5)
  grads = jax.jit(jax.grad(lambda p: jnp.sum(loss(p, batch))))
  _close_gradients(grads(bf16), grads(as32))
  if decode:
    greedy = lambda p: generate(p, ids, mask, 2, model=model, eos_token_id=-1)
    np.testing.assert_array_equal(greedy(bf16), greedy(as32))


def test_opt_bf16_forward_computes_the_float32_forward():
  config = OPTConfig(
    vocab_size=96,
    hidden_size=32,
    num_hidden_layers=3,
    ffn_dim=64,
    num_attention_heads=4,
    max_position_embeddings=32,
  )
  model = OPTForCausalLM(config)
  ids = jnp.asarray(np.random.default_rng(0).integers(3, 96, (2, 10)))
  mask = jnp.ones_like(ids).at[0, :3].set(0)  # left padding in row 0
  params = model.init(jax.random.key(0), ids, mask)["params"]
  _same_function(model, params, ids, mask)


@pytest.mark.parametrize(
  # Mistral's in CI's slow step, as the other Llama variants.
  "name",
  ["tiny_llama", pytest.param("tiny_mistral", marks=pytest.mark.slow)],
)
def test_llama_bf16_forward_computes_the_float32_forward(name):
  """Untied head (tiny_llama, also decoding) and tied (tiny_mistral)."""
  config, params = load_llama(FIXTURES / name)
  ids = jnp.asarray(np.random.default_rng(1).integers(3, 60, (2, 9)))
  mask = jnp.ones_like(ids).at[1, -2:].set(0)  # right padding in row 1
  model = LlamaForCausalLM(config)
  _same_function(model, params, ids, mask, decode=name == "tiny_llama")
