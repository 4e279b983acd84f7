"""Llama / Mistral causal language models in Flax (DP-ZO Table 4 fine-tunes
Mistral-7B).

The computation is that of Hugging Face ``LlamaForCausalLM`` and
``MistralForCausalLM`` (weights load with
:func:`zoprivacy.models.hf_llama.load_llama`):

* token embedding, then ``num_hidden_layers`` pre-norm decoder layers
  ``x + Attn(RMSNorm(x))``, ``x + MLP(RMSNorm(x))``, a final RMSNorm and the
  LM head (``lm_head``, or the tied embedding when
  ``tie_word_embeddings``);
* RMSNorm ``w * x / sqrt(mean(x^2) + eps)``, computed in float32;
* grouped-query attention: ``num_attention_heads`` query heads share
  ``num_key_value_heads`` key/value heads (query head ``h`` reads key/value
  head ``h // (H / KV)``), scores ``q k^T / sqrt(head_dim)`` in float32;
* rotary position embeddings on queries and keys, HF's "rotate half"
  convention: ``x cos(p f) + rotate_half(x) sin(p f)`` with frequencies
  ``f_i = rope_theta^(-2i / head_dim)`` for the first and second halves of
  each head; the position ``p`` of a token is the number of real tokens
  before it (``cumsum(mask) - 1``, as HF generation computes it), so
  padding on either side changes nothing;
* SwiGLU MLP ``down(silu(gate(x)) * up(x))``; no biases.

Mistral's ``sliding_window`` limits attention to the last ``W`` keys; a
sequence no longer than ``W`` attends causally to everything, which is all
this module's forward pass computes, so it refuses longer sequences.
Greedy generation (:mod:`zoprivacy.models.opt_generate`) applies the window
in its key/value-cache masks and decodes past it.

The layers are one ``nn.scan`` over stacked parameters, as in
:mod:`zoprivacy.models.opt`; ``param_dtype`` may be bfloat16 with float32
compute, logits and losses. :func:`zoprivacy.models.opt.per_example_lm_loss`
is the per-example loss of this model too (the same ``__call__``
signature), and ``opt.perturb_float32`` its bfloat16 perturbation.
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from zoprivacy.models import (
  causal_attention,
  chunked_head,
  hf_config,
  narrow_slices,
  stacked_layers,
)
from zoprivacy.models.lm_loss import causal_lm_call
from zoprivacy.models.opt import position_ids

MODEL_TYPES = ("llama", "mistral")


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
  """Hyper-parameters, named as in Hugging Face ``config.json``."""

  vocab_size: int = 32000
  hidden_size: int = 4096
  intermediate_size: int = 11008
  num_hidden_layers: int = 32
  num_attention_heads: int = 32
  num_key_value_heads: int | None = None
  head_dim: int | None = None
  max_position_embeddings: int = 4096
  rms_norm_eps: float = 1e-6
  rope_theta: float = 10000.0
  tie_word_embeddings: bool = False
  sliding_window: int | None = None
  model_type: str = "llama"
  bos_token_id: int = 1
  eos_token_id: int = 2
  pad_token_id: int | None = None
  # Prefix tuning (zoprivacy.models.prefix_tuning): trainable keys and
  # values prepended in every attention layer. Not a Hugging Face field.
  num_prefix_tokens: int = 0

  def __post_init__(self):
    if self.num_key_value_heads is None:
      object.__setattr__(self, "num_key_value_heads", self.num_attention_heads)
    if self.head_dim is None:
      object.__setattr__(
        self, "head_dim", self.hidden_size // self.num_attention_heads
      )
    if self.num_attention_heads % self.num_key_value_heads:
      raise ValueError(
        "num_attention_heads must be a multiple of num_key_value_heads"
      )
    if self.model_type not in MODEL_TYPES:
      raise ValueError(f"model_type {self.model_type!r} not in {MODEL_TYPES}")

  @classmethod
  def from_hf(cls, config) -> LlamaConfig:
    """From a Hugging Face ``config.json`` (path, folder or dict)."""
    config = hf_config.as_dict(config)
    hf_config.require(config, "hidden_act", "silu", ("silu",))
    if config.get("attention_bias") or config.get("mlp_bias"):
      raise ValueError("attention or MLP biases are not supported")
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
      raise ValueError(f"RoPE scaling {rope} is not supported")
    if "rope_theta" not in config and "rope_theta" in rope:
      config["rope_theta"] = rope["rope_theta"]
    if isinstance(config.get("eos_token_id"), list):
      config["eos_token_id"] = config["eos_token_id"][0]
    return hf_config.config_from_dict(cls, config)


def check_length(length: int, config: LlamaConfig):
  """Refuses sequences past the positions or Mistral's sliding window."""
  limit = config.max_position_embeddings
  if config.sliding_window:
    limit = min(limit, config.sliding_window)
  if length > limit:
    raise ValueError(
      f"sequence length {length} exceeds {limit} (max_position_embeddings "
      f"{config.max_position_embeddings}, sliding_window "
      f"{config.sliding_window})"
    )


def rotary(x, positions, theta: float):
  """HF ``apply_rotary_pos_emb`` on ``x`` ``[B, S, heads, head_dim]`` at
  integer ``positions`` ``[B, S]``, in float32."""
  half = x.shape[-1] // 2
  freqs = theta ** (-jnp.arange(half, dtype=jnp.float32) * 2 / x.shape[-1])
  angles = positions.astype(jnp.float32)[..., None] * freqs  # [B, S, half]
  angles = jnp.concatenate([angles, angles], axis=-1)[:, :, None, :]
  x32 = x.astype(jnp.float32)
  rotated = jnp.concatenate([-x32[..., half:], x32[..., :half]], axis=-1)
  return (x32 * jnp.cos(angles) + rotated * jnp.sin(angles)).astype(x.dtype)


class RMSNorm(nn.Module):
  eps: float
  dtype: jnp.dtype = jnp.float32
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x):
    scale = self.param(
      "scale", nn.initializers.ones, x.shape[-1:], self.param_dtype
    )
    x32 = x.astype(jnp.float32)
    x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + self.eps)
    return (scale.astype(jnp.float32) * x32).astype(self.dtype)


class _LlamaModule(nn.Module):
  config: LlamaConfig
  dtype: jnp.dtype = jnp.float32
  param_dtype: jnp.dtype = jnp.float32

  def dense(self, features, name):
    return nn.Dense(
      features,
      use_bias=False,
      dtype=self.dtype,
      param_dtype=self.param_dtype,
      name=name,
    )


class LlamaAttention(_LlamaModule):
  """Grouped-query self-attention with RoPE (module docstring)."""

  @nn.compact
  def __call__(self, h, cache, allowed, write_index, positions):
    c = self.config
    heads, kv, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    split = lambda y, n: y.reshape(y.shape[:-1] + (n, hd))
    q = split(self.dense(heads * hd, "q_proj")(h), heads)
    k = split(self.dense(kv * hd, "k_proj")(h), kv)
    v = split(self.dense(kv * hd, "v_proj")(h), kv)
    q, k = (
      rotary(q, positions, c.rope_theta),
      rotary(k, positions, c.rope_theta),
    )
    k, v, cache = causal_attention.write_cache(cache, k, v, write_index)
    if c.num_prefix_tokens:  # prefix tuning: keys/values every query sees
      k, v, allowed = causal_attention.prepend_prefix(
        self, k, v, allowed, c.num_prefix_tokens
      )
    group = heads // kv  # query head h reads key/value head h // group
    k, v = jnp.repeat(k, group, axis=2), jnp.repeat(v, group, axis=2)
    ctx = causal_attention.attend(q, k, v, allowed, self.dtype, hd**-0.5)
    return self.dense(c.hidden_size, "o_proj")(ctx), cache


class LlamaMLP(_LlamaModule):
  """SwiGLU: ``down(silu(gate(x)) * up(x))``."""

  @nn.compact
  def __call__(self, h):
    c = self.config
    gate = nn.silu(self.dense(c.intermediate_size, "gate_proj")(h))
    up = self.dense(c.intermediate_size, "up_proj")(h)
    return self.dense(c.hidden_size, "down_proj")(gate * up)


class LlamaDecoderLayer(_LlamaModule):
  """One pre-norm layer, scanned by :class:`LlamaForCausalLM`. ``cache``,
  ``allowed`` and ``write_index`` as in :class:`~zoprivacy.models.opt.
  OPTDecoderLayer`; ``positions`` ``[B, S]`` for RoPE."""

  @nn.compact
  def __call__(self, x, cache, allowed, write_index, positions):
    c = self.config
    kw = dict(dtype=self.dtype, param_dtype=self.param_dtype)
    norm = functools.partial(RMSNorm, c.rms_norm_eps, **kw)
    a, cache = LlamaAttention(c, **kw, name="self_attn")(
      norm(name="input_layernorm")(x), cache, allowed, write_index, positions
    )
    x = x + a
    h = norm(name="post_attention_layernorm")(x)
    return x + LlamaMLP(c, **kw, name="mlp")(h), cache


class LlamaForCausalLM(_LlamaModule):
  """The decoder and its LM head (module docstring). ``__call__(input_ids,
  attention_mask, logit_positions)`` as :class:`~zoprivacy.models.opt.
  OPTForCausalLM`'s; ``decode`` with an explicit key/value cache."""

  def setup(self):
    c = self.config
    kw = dict(dtype=self.dtype, param_dtype=self.param_dtype)
    self.embed_tokens = nn.Embed(c.vocab_size, c.hidden_size, **kw)
    self.layers = nn.scan(
      LlamaDecoderLayer,
      variable_axes={"params": 0},
      split_rngs={"params": True},
      in_axes=(0, nn.broadcast, nn.broadcast, nn.broadcast),
      length=c.num_hidden_layers,
    )(c, **kw)
    self.norm = RMSNorm(c.rms_norm_eps, self.dtype, self.param_dtype)
    if not c.tie_word_embeddings:  # float32 logits
      self.lm_head = nn.Dense(
        c.vocab_size,
        use_bias=False,
        dtype=jnp.float32,
        param_dtype=self.param_dtype,
      )

  def decode(self, input_ids, positions, allowed, cache=None, write_index=0):
    """Final hidden states ``[B, S, hidden]`` and the cache (each of keys
    and values ``[layers, B, T, kv_heads, head_dim]``)."""
    x = stacked_layers.embed_lookup(self.embed_tokens, input_ids)
    layer = LlamaDecoderLayer(
      self.config, self.dtype, self.param_dtype, parent=None
    )
    x, cache = stacked_layers.scan_layers(
      self.layers, layer, x, cache, allowed, write_index, positions
    )
    return self.norm(x), cache

  def logits(self, hidden):
    """The LM head in float32 (a 16-bit one by vocabulary chunks,
    :func:`chunked_head.head_logits`)."""
    vocab = self.config.vocab_size
    if self.config.tie_word_embeddings:
      table = self.embed_tokens.embedding
      rows = chunked_head.table_rows(table)
      return chunked_head.head_logits(hidden, table, rows, vocab)
    if self.is_initializing() or not narrow_slices.is_narrow(
      kernel := self.lm_head.variables["params"]["kernel"]
    ):
      return self.lm_head(hidden.astype(jnp.float32))
    rows = chunked_head.kernel_rows(kernel)
    return chunked_head.head_logits(hidden, kernel, rows, vocab)

  def token_nll(self, hidden, targets, vocab_chunk=chunked_head.DEFAULT_CHUNK):
    """``-log p(targets | hidden)`` from the LM head, ``vocab_chunk``
    vocabulary rows at a time (:mod:`~zoprivacy.models.chunked_head`)."""
    if self.config.tie_word_embeddings:
      rows = chunked_head.table_rows(self.embed_tokens.embedding)
    else:
      kernel = self.lm_head.variables["params"]["kernel"]
      rows = chunked_head.kernel_rows(kernel)
    vocab = self.config.vocab_size
    return chunked_head.chunked_nll(hidden, targets, rows, vocab, vocab_chunk)

  def positions(self, attention_mask):
    """Each token's position index (padding's is unused)."""
    return jnp.maximum(position_ids(attention_mask), 0)

  def check_sequence_length(self, length: int):
    check_length(length, self.config)

  __call__ = causal_lm_call
