"""The in-scan layer-wise step on Llama / Mistral (RoPE, grouped-query
attention, an untied or tied LM head) equals the generic counter-hash step.

Tolerances as in ``test_causal_lm_zo.py`` (its PRIVACY comment): the two
paths are the same float32 arithmetic in different XLA fusions.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_causal_lm_zo import (
  LEARNING_RATE,
  PRIVACY,
  _generic_step,
  _max_relative_difference,
)

import zoprivacy
from zoprivacy.models import causal_lm_zo
from zoprivacy.models.llama import LlamaConfig, LlamaForCausalLM
from zoprivacy.models.opt import per_example_lm_loss
from zoprivacy.training import layerwise

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _llama(tied: bool):
  config = LlamaConfig(
    vocab_size=40,
    hidden_size=16,
    intermediate_size=24,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=32,
    tie_word_embeddings=tied,
  )
  model = LlamaForCausalLM(config)
  rng = np.random.default_rng(0)
  ids = rng.integers(3, 40, (4, 10)).astype(np.int32)
  attention = np.ones_like(ids)
  attention[0, :3] = 0  # left padding in example 0
  loss_mask = np.zeros_like(ids)
  loss_mask[:, 5:] = 1
  batch = dict(
    input_ids=jnp.asarray(ids),
    attention_mask=jnp.asarray(attention),
    loss_mask=jnp.asarray(loss_mask),
  )
  params = model.init(jax.random.key(1), ids, attention)["params"]
  return model, batch, params


# Both heads in CI's slow step (9-13 s each on 2 cores), as the other Llama
# variants of the LLM equivalences: the default suite checks the in-scan
# step on OPT (tests/models/test_causal_lm_zo.py).
@pytest.mark.slow
@pytest.mark.parametrize("tied", [False, True])
def test_llama_in_scan_step_equals_generic_counter_step(tied):
  model, batch, params = _llama(tied)
  loss = functools.partial(per_example_lm_loss, model=model)
  in_scan_loss = causal_lm_zo.in_scan_lm_loss(model=model)
  np.testing.assert_allclose(
    jax.jit(in_scan_loss)(params, None, batch, None),
    jax.jit(loss)(params, batch),
    rtol=1e-6,
  )
  # The second counter hash: the layer-wise step's default, and what 'auto'
  # draws with on a model of at least 2^16 parameters.
  hyper = dict(PRIVACY, directions="gaussian", direction_prng="counter2")
  estimator = zoprivacy.dpzero(**hyper)
  tx, generic_step = _generic_step(estimator, loss)
  zo = layerwise.layerwise_dpzero(
    perturbed_loss=in_scan_loss, learning_rate=LEARNING_RATE, **hyper
  )
  generic_step, in_scan_step = jax.jit(generic_step), jax.jit(zo.step)
  p_generic, s_generic = params, zoprivacy.init(tx, params)
  p_scan, s_scan = params, zo.init(params)
  for _ in range(2):
    p_generic, s_generic = generic_step(p_generic, s_generic, batch)
    p_scan, s_scan = in_scan_step(p_scan, s_scan, batch)
    np.testing.assert_allclose(
      s_scan.released, s_generic[0].released, rtol=1e-4
    )
    assert _max_relative_difference(p_generic, p_scan) <= 1e-5
  # Every part moved, the untied head and the embedding included.
  for name in ("embed_tokens", "norm", "layers") + (
    () if tied else ("lm_head",)
  ):
    assert _max_relative_difference(params[name], p_scan[name]) > 1e-5, name


def test_other_models_are_refused():
  with pytest.raises(TypeError, match="No in-scan forward pass"):
    causal_lm_zo.architecture(object())
