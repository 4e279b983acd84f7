"""Prefix tuning on OPT and Llama (grouped-query attention, RoPE):
exactness of the real-activation initialization, the per-example contract,
KV-cache decoding, and the layer-wise step on the prefix adapters equal to
the generic step."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_causal_lm_zo import _max_relative_difference, _opt, adapter_steps
from test_llama_in_scan import _llama

from zoprivacy.models import peft
from zoprivacy.models.opt import per_example_lm_loss
from zoprivacy.models.opt_generate import generate
from zoprivacy.models.prefix_tuning import PrefixTuning

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
P = 3
FAMILIES = ["opt", "llama"]
# The slower equivalence tests run Llama in CI's slow step only.
OPT_THEN_SLOW_LLAMA = ["opt", pytest.param("llama", marks=pytest.mark.slow)]
# Prefix width per layer: OPT hidden 16; Llama 2 key/value heads of 4.
WIDTH = {"opt": 16, "llama": 8}


def _prefix_model(family="opt"):
  if family == "opt":
    base, batch, params = _opt(2, 16, 32, 48, 4, 10)
  else:
    base, batch, params = _llama(tied=False)
  prefix = PrefixTuning(num_tokens=P)
  adapters = prefix.init(jax.random.key(11), params, config=base.config)
  model = type(base)(prefix.model_config(base.config))
  return base, model, prefix, batch, params, adapters


@pytest.mark.slow  # the layer-wise prefix step's test below runs on OPT
@pytest.mark.parametrize("family", FAMILIES)
def test_real_activation_prefix_equals_the_tokens_before_the_input(family):
  """With the prefix set to the keys/values of P random tokens t, the
  prefix model on x computes what the pretrained model computes on [t, x]
  (t attending causally among themselves, x to all of t and causally to
  itself, x's positions restarting at 0): logits to 1e-5."""
  base, model, prefix, batch, params, adapters = _prefix_model(family)
  sa = adapters["layers"]["self_attn"]
  assert set(sa) == {"prefix_keys", "prefix_values"}
  assert sa["prefix_keys"].shape == (2, P, WIDTH[family])
  merged = prefix.merge(params, adapters)
  ids = batch["input_ids"][1:2]  # an unpadded example
  s = ids.shape[1]
  got = model.apply({"params": merged}, ids, jnp.ones_like(ids))

  t = prefix.token_ids(jax.random.key(11), base.config)
  joint = jnp.concatenate([t, ids], axis=1)
  positions = jnp.concatenate([jnp.arange(P), jnp.arange(s)])[None]
  allowed = np.tril(np.ones((P + s, P + s), bool))
  allowed[P:, :P] = True
  hidden, _ = base.apply(
    {"params": params},
    joint,
    positions,
    jnp.asarray(allowed)[None],
    method=base.decode,
  )
  want = base.apply({"params": params}, hidden, method=base.logits)[:, P:]
  np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
  # and the prefix does change the model
  plain = base.apply({"params": params}, ids, jnp.ones_like(ids))
  assert np.max(np.abs(np.asarray(plain) - np.asarray(got))) > 1e-3


@pytest.mark.parametrize("family", FAMILIES)
def test_prefix_loss_is_per_example(family):
  """Changing example 1 leaves every other loss bit-for-bit unchanged; the
  loss of a batch of one equals that example's loss in the batch."""
  _, model, prefix, batch, params, adapters = _prefix_model(family)
  loss = jax.jit(
    peft.bind_frozen(
      functools.partial(per_example_lm_loss, model=model),
      params,
      lambda a, p: prefix.merge(p, a),
    )
  )
  out = np.asarray(loss(adapters, batch))
  changed = dict(batch, input_ids=batch["input_ids"].at[1, -1].set(5))
  out2 = np.asarray(loss(adapters, changed))
  np.testing.assert_array_equal(out[[0, 2, 3]], out2[[0, 2, 3]])
  assert out[1] != out2[1]
  alone = loss(adapters, {k: v[2:3] for k, v in batch.items()})
  np.testing.assert_allclose(alone, out[2:3], rtol=1e-6)


@pytest.mark.slow  # decoding, not training: ~10 s a family
@pytest.mark.parametrize("family", FAMILIES)
def test_prefix_greedy_decoding_with_cache_equals_recompute(family):
  _, model, prefix, batch, params, adapters = _prefix_model(family)
  merged = prefix.merge(params, adapters)
  ids, mask = batch["input_ids"][:2, :6], batch["attention_mask"][:2, :6]
  new = 3
  got = generate(
    merged, ids, mask, new, model=model, eos_token_id=-1, pad_token_id=0
  )
  seq, m = ids, mask
  for _ in range(new):
    logits = model.apply({"params": merged}, seq, m)
    nxt = jnp.argmax(logits[:, -1], axis=-1).astype(jnp.int32)
    seq = jnp.concatenate([seq, nxt[:, None]], axis=1)
    m = jnp.concatenate([m, jnp.ones_like(nxt)[:, None]], axis=1)
  np.testing.assert_array_equal(got, seq[:, 6:])


@pytest.mark.parametrize("family", OPT_THEN_SLOW_LLAMA)
def test_layerwise_step_on_prefix_equals_generic_step(family):
  """The in-scan step slices the stacked prefix adapters per layer: after
  one step it equals the generic dpzero + sgd step on the adapters (frozen
  weights bound in the loss) to 1e-5 relative; the frozen weights are
  untouched and the prefix moved."""
  _, model, prefix, batch, params, adapters = _prefix_model(family)
  assemble = lambda trainable, frozen: prefix.merge(frozen, trainable)
  frozen_before = jax.tree.map(np.array, params)
  a_generic, a_scan, _ = adapter_steps(model, batch, params, adapters, assemble)
  assert _max_relative_difference(a_generic, a_scan) <= 1e-5
  jax.tree.map(np.testing.assert_array_equal, params, frozen_before)
  assert _max_relative_difference(adapters, a_scan) > 1e-4


def test_prefix_options_are_checked():
  with pytest.raises(ValueError, match="num_tokens"):
    PrefixTuning(num_tokens=0)
  base, _, prefix, _, _, _ = _prefix_model()
  assert prefix.model_config(base.config) == dataclasses.replace(
    base.config, num_prefix_tokens=P
  )
