"""Llama / Mistral (grouped-query attention, RoPE, RMSNorm, SwiGLU) against
the reference PyTorch implementation: fixtures written by Hugging Face
transformers (``tests/fixtures/make_tiny_llama.py``), read here without
torch."""

import functools
import json
import pathlib
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import safetensors.numpy as safetensors_numpy

from zoprivacy.models import opt
from zoprivacy.models.hf_checkpoint import load_bpe_tokenizer
from zoprivacy.models.hf_llama import llama_params_from_hf, load_llama
from zoprivacy.models.llama import LlamaConfig, LlamaForCausalLM
from zoprivacy.models.opt_generate import generate

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures"
NAMES = ("tiny_llama", "tiny_mistral")


def _load(name):
  config, params = load_llama(FIXTURES / name)
  reference = np.load(FIXTURES / name / "reference_logits.npz")
  return config, params, reference


@pytest.mark.parametrize("name", NAMES)
def test_logits_match_the_reference_implementation(name):
  """float32 logits within 1e-4 of transformers' at every real token
  (measured: 4.5e-6), rows right-padded."""
  config, params, ref = _load(name)
  assert config.num_key_value_heads == 2 < config.num_attention_heads
  assert config.tie_word_embeddings == (name == "tiny_mistral")
  assert ("lm_head" in params) != config.tie_word_embeddings
  model = LlamaForCausalLM(config)
  ids = jnp.asarray(ref["input_ids"], jnp.int32)
  mask = jnp.asarray(ref["attention_mask"], jnp.int32)
  logits = np.asarray(model.apply({"params": params}, ids, mask))
  real = ref["attention_mask"] == 1
  np.testing.assert_allclose(logits[real], ref["logits"][real], atol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_greedy_decoding_with_cache_matches_the_reference(name):
  """KV-cache greedy decoding of left-padded prompts equals transformers'
  ``generate(do_sample=False)`` (cache against full recompute is tested on
  OPT, through the same ``generate``)."""
  config, params, ref = _load(name)
  model = LlamaForCausalLM(config)
  prompt = jnp.asarray(ref["greedy_prompt"], jnp.int32)
  prompt_mask = jnp.asarray(ref["greedy_prompt_mask"], jnp.int32)
  got = generate(params, prompt, prompt_mask, 8, model=model, eos_token_id=-1)
  np.testing.assert_array_equal(got, ref["greedy"])


def test_per_example_loss_and_bf16_two_point_estimate():
  """The OPT per-example loss serves Llama: changing example 1 changes no
  other loss; with bfloat16 weights perturbed in float32, the two-point
  estimate agrees with the float32 one to 5% (l = 1e-3)."""
  config, params, ref = _load("tiny_llama")
  model = LlamaForCausalLM(config)
  ids = jnp.asarray(ref["input_ids"], jnp.int32)
  batch = {
    "input_ids": ids,
    "attention_mask": jnp.asarray(ref["attention_mask"], jnp.int32),
    "loss_mask": jnp.zeros_like(ids).at[:, 3:6].set(1),
  }
  loss = jax.jit(functools.partial(opt.per_example_lm_loss, model=model))
  out = np.asarray(loss(params, batch))
  changed = dict(batch, input_ids=ids.at[1, 4].set(7))
  out2 = np.asarray(loss(params, changed))
  np.testing.assert_array_equal(out[[0, 2]], out2[[0, 2]])
  assert out[1] != out2[1]

  u = jax.tree.map(
    lambda x: jax.random.normal(jax.random.key(3), x.shape), params
  )
  bf16 = jax.tree.map(lambda x: x.astype(jnp.bfloat16), params)
  as32 = jax.tree.map(lambda x: x.astype(jnp.float32), bf16)

  def estimate(p):
    plus = opt.perturb_float32(p, u, 1e-3)
    minus = opt.perturb_float32(p, u, -1e-3)
    return (loss(plus, batch) - loss(minus, batch)) / 2e-3

  exact = np.asarray(estimate(as32))  # the same weights in float32
  got = np.asarray(estimate(bf16))
  assert np.max(np.abs(got - exact)) <= 0.05 * np.max(np.abs(exact))


def test_bad_checkpoints_and_long_sequences_are_refused(tmp_path):
  config, _, _ = _load("tiny_llama")
  tensors = safetensors_numpy.load_file(
    str(FIXTURES / "tiny_llama" / "model.safetensors")
  )
  broken = dict(tensors)
  broken["model.layers.1.mlp.up_proj.weight"] = np.zeros((64, 64), np.float32)
  with pytest.raises(ValueError, match=r"layers\.1\.mlp\.up_proj\.weight"):
    llama_params_from_hf(broken, config)
  del broken["model.norm.weight"]
  with pytest.raises(KeyError, match=r"model\.norm\.weight"):
    llama_params_from_hf(broken, config)
  with pytest.raises(ValueError, match="sequence length 129 exceeds 128"):
    LlamaForCausalLM(config).init(
      jax.random.key(0), jnp.ones((1, 129), jnp.int32)
    )
  short = LlamaConfig(**{**config.__dict__, "sliding_window": 16})
  with pytest.raises(ValueError, match="sliding_window 16"):
    LlamaForCausalLM(short).init(
      jax.random.key(0), jnp.ones((1, 17), jnp.int32)
    )
  hf = json.loads((FIXTURES / "tiny_llama" / "config.json").read_text())
  for bad, match in (
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0}}, "RoPE"),
    ({"attention_bias": True}, "biases"),
  ):
    with pytest.raises(ValueError, match=match):
      LlamaConfig.from_hf({**hf, **bad})
  shutil.copy(FIXTURES / "tiny_llama" / "config.json", tmp_path)
  with pytest.raises(FileNotFoundError, match="model.safetensors"):
    load_llama(tmp_path)


def test_tokenizer_without_pad_token_pads_with_unk(tmp_path):
  """Llama / Mistral tokenizers have no pad token: padding (masked) uses
  the unknown token, else the end token."""
  from tokenizers import Tokenizer, models

  tok = Tokenizer(
    models.WordLevel({"<unk>": 0, "</s>": 1, "a": 2}, unk_token="<unk>")
  )
  tok.save(str(tmp_path / "tokenizer.json"))
  (tmp_path / "tokenizer_config.json").write_text(
    json.dumps({"eos_token": "</s>", "unk_token": "<unk>"})
  )
  assert load_bpe_tokenizer(tmp_path).padding["pad_id"] == 0
  (tmp_path / "tokenizer_config.json").write_text(
    json.dumps({"eos_token": "</s>", "unk_token": "<none>"})
  )
  assert load_bpe_tokenizer(tmp_path).padding["pad_id"] == 1
