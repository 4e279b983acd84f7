"""OPT causal language model (Zhang et al., 2022) in Flax, for zeroth-order
fine-tuning as in MeZO (Malladi et al., 2023), DP-ZO (Tang et al., 2024) and
DPZero (Zhang et al., 2024).

The computation is that of Hugging Face ``OPTForCausalLM`` (weights load with
:func:`zoprivacy.models.hf_checkpoint.load_opt`):

* token embedding (``word_embed_proj_dim`` wide), optional ``project_in`` to
  ``hidden_size``, plus a learned position embedding indexed by
  ``position + 2`` (OPT's offset), where the position of a token is the number
  of real tokens before it, ``cumsum(attention_mask) * attention_mask - 1``
  (so padding anywhere, left or right, changes no real token's position);
* ``num_hidden_layers`` decoder layers; pre-LN (``do_layer_norm_before=True``,
  all OPT sizes but 350m) ``x + Attn(LN(x))``, ``x + FFN(LN(x))``, or post-LN
  (opt-350m) ``LN(x + Attn(x))``, ``LN(x + FFN(x))``; causal multi-head
  attention ``softmax(q k^T / sqrt(d_head) + mask) v`` over real tokens only;
  ``FFN(x) = fc2(relu(fc1(x)))``;
* final LayerNorm (pre-LN only), optional ``project_out``, and logits from the
  tied embedding ``h E^T``.

The layers are one ``nn.scan`` over parameters stacked on a leading layer
axis, so compile time does not grow with depth (with 16-bit weights the
forward pass slices the stacks one layer at a time as their bits,
:mod:`~zoprivacy.models.stacked_layers`, so no float32 copy of a stack, of
the embedding or of the head is formed). Deterministic (no dropout):
``f(x + l u)`` and ``f(x - l u)`` are the same function.

Precision. ``param_dtype`` is the stored dtype (float32 or bfloat16) and
``dtype`` the compute dtype (float32 by default); logits, the softmax and the
losses are always float32. For zeroth-order estimates with bfloat16 weights
this module takes the *perturb-in-float32* approach: the stored weights stay
bfloat16 and the perturbation is added in float32 (:func:`perturb_float32`,
``float32(w) + l u``) before a float32 forward pass. Adding ``l u`` with
``l = 1e-3`` to a bfloat16 weight directly would round it away (bfloat16 keeps
8 significant bits: the spacing near 1.0 is 2**-7 ~ 8e-3). The estimators
perturb in each leaf's own dtype (``queries.perturb``), so hand them float32
trainable leaves and keep the frozen ones bfloat16::

    config, params = load_opt(path, param_dtype=jnp.bfloat16)
    model = OPTForCausalLM(config)                      # float32 compute
    trainable, frozen = peft.split_params(params, peft.bitfit)
    trainable = jax.tree.map(lambda x: x.astype(jnp.float32), trainable)
    loss = peft.bind_frozen(
      functools.partial(per_example_lm_loss, model=model), frozen
    )                                 # batched_loss=loss for the estimators

Stacked kernels are 3-D ``[layer, in, out]``; ``peft.LoRA`` adapts 2-D
kernels only.
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
  stacked_layers,
)
from zoprivacy.models.lm_loss import (  # noqa: F401 (re-exported)
  answer_window,
  causal_lm_call,
  gather_positions,
  per_example_lm_loss,
)

POSITION_OFFSET = 2  # OPTLearnedPositionalEmbedding: index = position + 2

_ACTIVATIONS = {
  "relu": nn.relu,
  "gelu": functools.partial(nn.gelu, approximate=False),
}


@dataclasses.dataclass(frozen=True)
class OPTConfig:
  """Hyper-parameters, named as in Hugging Face ``config.json`` (``d_model``
  is read as ``hidden_size``; ``word_embed_proj_dim`` defaults to it)."""

  vocab_size: int = 50272
  hidden_size: int = 768
  num_hidden_layers: int = 12
  ffn_dim: int = 3072
  num_attention_heads: int = 12
  max_position_embeddings: int = 2048
  word_embed_proj_dim: int | None = None
  do_layer_norm_before: bool = True
  remove_final_layer_norm: bool = False
  enable_bias: bool = True
  layer_norm_elementwise_affine: bool = True
  activation_function: str = "relu"
  pad_token_id: int = 1
  bos_token_id: int = 2
  eos_token_id: int = 2
  layer_norm_eps: float = 1e-5  # torch.nn.LayerNorm's default, used by OPT
  # Prefix tuning (zoprivacy.models.prefix_tuning): trainable keys and values
  # prepended in every attention layer. Not a Hugging Face field.
  num_prefix_tokens: int = 0

  def __post_init__(self):
    if self.word_embed_proj_dim is None:
      object.__setattr__(self, "word_embed_proj_dim", self.hidden_size)
    if self.activation_function not in _ACTIVATIONS:
      raise ValueError(
        f"activation_function {self.activation_function!r} not supported "
        f"(one of {sorted(_ACTIVATIONS)})"
      )
    if self.hidden_size % self.num_attention_heads:
      raise ValueError("hidden_size must be divisible by num_attention_heads")

  @property
  def has_projections(self) -> bool:
    return self.word_embed_proj_dim != self.hidden_size

  @property
  def has_final_layer_norm(self) -> bool:
    return self.do_layer_norm_before and not self.remove_final_layer_norm

  @classmethod
  def from_hf(cls, config) -> OPTConfig:
    """From a Hugging Face ``config.json`` (path, folder or dict)."""
    config = hf_config.as_dict(config)
    hf_config.require(config, "model_type", "opt", ("opt",))
    if "d_model" in config and "hidden_size" not in config:
      config["hidden_size"] = config["d_model"]
    if "_remove_final_layer_norm" in config:
      config["remove_final_layer_norm"] = config["_remove_final_layer_norm"]
    return hf_config.config_from_dict(cls, config)


def position_ids(attention_mask: jax.Array) -> jax.Array:
  """HF OPT positions ``cumsum(mask) * mask - 1`` (padding gets ``-1``)."""
  mask = attention_mask.astype(jnp.int32)
  return jnp.cumsum(mask, axis=-1) * mask - 1


def check_length(length: int, config: OPTConfig):
  if length > config.max_position_embeddings:
    raise ValueError(
      f"sequence length {length} exceeds max_position_embeddings "
      f"{config.max_position_embeddings}"
    )


def _layer_norm(config: OPTConfig, dtype, param_dtype, name=None):
  affine = config.layer_norm_elementwise_affine
  return nn.LayerNorm(
    epsilon=config.layer_norm_eps,
    use_bias=affine,
    use_scale=affine,
    dtype=dtype,
    param_dtype=param_dtype,
    name=name,
  )


class _OPTModule(nn.Module):
  """The fields every OPT module shares."""

  config: OPTConfig
  dtype: jnp.dtype = jnp.float32
  param_dtype: jnp.dtype = jnp.float32


class OPTAttention(_OPTModule):
  """Causal multi-head self-attention, ``softmax(q k^T + mask) v`` with ``q``
  scaled by ``head_dim ** -0.5`` after its projection (HF ``OPTAttention``).
  Scores and softmax in float32."""

  @nn.compact
  def __call__(self, x, cache, allowed, write_index):
    c = self.config
    heads = c.num_attention_heads
    head_dim = c.hidden_size // heads

    def project(name, y):
      return nn.Dense(
        c.hidden_size,
        use_bias=c.enable_bias,
        dtype=self.dtype,
        param_dtype=self.param_dtype,
        name=name,
      )(y)

    split = lambda y: y.reshape(y.shape[:-1] + (heads, head_dim))
    q = split(project("q_proj", x)) * jnp.asarray(head_dim**-0.5, self.dtype)
    k, v = split(project("k_proj", x)), split(project("v_proj", x))
    k, v, cache = causal_attention.write_cache(cache, k, v, write_index)
    if c.num_prefix_tokens:  # prefix tuning: keys/values every query sees
      k, v, allowed = causal_attention.prepend_prefix(
        self, k, v, allowed, c.num_prefix_tokens
      )
    ctx = causal_attention.attend(q, k, v, allowed, self.dtype)
    return project("out_proj", ctx), cache


class OPTDecoderLayer(_OPTModule):
  """One decoder layer; scanned over the layer axis by :class:`OPTForCausalLM`.

  ``carry``: hidden states ``[B, S, D]``. ``cache``: ``None`` (attend within
  the ``S`` tokens) or this layer's ``(keys, values)`` ``[B, T, H, D/H]``, into
  which the new keys/values are written at slot ``write_index``.
  ``allowed``: ``[B, S, T]`` boolean, which keys each query may attend to.
  """

  @nn.compact
  def __call__(self, x, cache, allowed, write_index):
    c = self.config
    dense = functools.partial(
      nn.Dense,
      use_bias=c.enable_bias,
      dtype=self.dtype,
      param_dtype=self.param_dtype,
    )
    norm = functools.partial(_layer_norm, c, self.dtype, self.param_dtype)
    pre_ln = c.do_layer_norm_before

    h = norm(name="self_attn_layer_norm")(x) if pre_ln else x
    a, cache = OPTAttention(c, self.dtype, self.param_dtype, name="self_attn")(
      h, cache, allowed, write_index
    )
    x = x + a
    if not pre_ln:
      x = norm(name="self_attn_layer_norm")(x)

    # feed-forward block
    h = norm(name="final_layer_norm")(x) if pre_ln else x
    h = _ACTIVATIONS[c.activation_function](dense(c.ffn_dim, name="fc1")(h))
    x = x + dense(c.hidden_size, name="fc2")(h)
    if not pre_ln:
      x = norm(name="final_layer_norm")(x)
    return x, cache


class OPTForCausalLM(_OPTModule):
  """OPT decoder with the tied LM head (module docstring).

  ``__call__(input_ids, attention_mask)``: float32 logits ``[B, S, vocab]``.
  ``decode``: hidden states with an explicit key/value cache (generation).
  """

  def setup(self):
    c = self.config
    kw = dict(dtype=self.dtype, param_dtype=self.param_dtype)
    self.embed_tokens = nn.Embed(c.vocab_size, c.word_embed_proj_dim, **kw)
    self.embed_positions = nn.Embed(
      c.max_position_embeddings + POSITION_OFFSET, c.hidden_size, **kw
    )
    if c.has_projections:
      self.project_in = nn.Dense(c.hidden_size, use_bias=False, **kw)
      self.project_out = nn.Dense(c.word_embed_proj_dim, use_bias=False, **kw)
    if c.has_final_layer_norm:
      self.final_layer_norm = _layer_norm(c, **kw)
    self.layers = nn.scan(
      OPTDecoderLayer,
      variable_axes={"params": 0},
      split_rngs={"params": True},
      in_axes=(0, nn.broadcast, nn.broadcast),
      length=c.num_hidden_layers,
    )(c, **kw)

  def decode(self, input_ids, positions, allowed, cache=None, write_index=0):
    """Final hidden states ``[B, S, word_embed_proj_dim]`` and the cache.

    ``positions``: ``[B, S]`` OPT positions (:func:`position_ids`);
    ``allowed``: ``[B, S, T]`` attention pattern; ``cache``: ``None`` or
    ``(keys, values)`` each ``[layers, B, T, heads, head_dim]``.
    """
    lookup = stacked_layers.embed_lookup
    x = lookup(self.embed_tokens, input_ids)
    if self.config.has_projections:
      x = self.project_in(x)
    x = x + lookup(self.embed_positions, positions + POSITION_OFFSET)
    layer = OPTDecoderLayer(
      self.config, self.dtype, self.param_dtype, parent=None
    )
    x, cache = stacked_layers.scan_layers(
      self.layers, layer, x, cache, allowed, write_index
    )
    if self.config.has_final_layer_norm:
      x = self.final_layer_norm(x)
    if self.config.has_projections:
      x = self.project_out(x)
    return x, cache

  def logits(self, hidden):
    """Tied LM head in float32: ``hidden @ embed_tokens^T`` (a 16-bit
    table by vocabulary chunks, :func:`chunked_head.head_logits`)."""
    table = self.embed_tokens.embedding
    return chunked_head.head_logits(
      hidden, table, chunked_head.table_rows(table), self.config.vocab_size
    )

  def token_nll(self, hidden, targets, vocab_chunk=chunked_head.DEFAULT_CHUNK):
    """``-log p(targets | hidden)`` from the tied head, ``vocab_chunk``
    vocabulary rows at a time (:mod:`~zoprivacy.models.chunked_head`)."""
    table = self.embed_tokens.embedding
    rows = chunked_head.table_rows(table)
    vocab = self.config.vocab_size
    return chunked_head.chunked_nll(hidden, targets, rows, vocab, vocab_chunk)

  def positions(self, attention_mask):
    """Each token's position index (padding's is unused)."""
    return position_ids(attention_mask)

  def check_sequence_length(self, length: int):
    check_length(length, self.config)

  __call__ = causal_lm_call


def perturb_float32(params, direction, scale):
  """``float32(params) + scale * direction``: the perturbation of DPZero eq.
  (2) / MeZO's ``x + l u`` added in float32 to (e.g. bfloat16) stored
  weights, for a float32 forward pass (module docstring, "Precision")."""
  return jax.tree.map(
    lambda p, u: p.astype(jnp.float32) + scale * u.astype(jnp.float32),
    params,
    direction,
  )
