"""Prefix tuning (Li & Liang, 2021), as MeZO fine-tunes with it, for OPT
and Llama / Mistral.

Every attention layer ``l`` gets ``P`` trainable key vectors and ``P`` value
vectors, ``prefix_keys[l]`` and ``prefix_values[l]`` (``[P, kv_heads *
head_dim]``: ``[P, hidden]`` for OPT, split into heads like the projected
keys and values), prepended to the layer's keys and values; every query may
attend to them (:func:`zoprivacy.models.causal_attention.prepend_prefix`).
The pretrained weights are frozen; only the ``2 L P kv_heads head_dim``
prefix numbers train. The prefix carries no position (Llama's prefix keys
are stored after RoPE), and the tokens keep theirs.

Initialization by real activations (MeZO's ``prefix_init_by_real_act``):
``P`` token ids are drawn at random from the vocabulary with a PUBLIC key
and run through the pretrained model; layer ``l``'s prefix is then the keys
and values those tokens produce at layer ``l`` (for Llama, rotated at
positions ``0..P-1``). At that point the prefix model computes exactly what
the pretrained model computes on the ``P`` tokens followed by the input
(with the input's positions restarting at 0), which
``tests/models/test_prefix_tuning.py`` checks for both families.

The adapters are stacked on the layer axis under ``layers/self_attn``, like
:class:`~zoprivacy.models.peft.StackedLoRA`'s, so the generic step and the
layer-wise step of :mod:`zoprivacy.models.causal_lm_zo` (which slices them per
layer inside the scan) train them alike::

    prefix = PrefixTuning(num_tokens=5)
    model = OPTForCausalLM(prefix.model_config(config))  # or LlamaForCausalLM
    adapters = prefix.init(jax.random.key(seed), params, config=config)
    assemble = lambda trainable, frozen: prefix.merge(frozen, trainable)
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from zoprivacy.models import peft
from zoprivacy.models.llama import LlamaConfig, LlamaForCausalLM
from zoprivacy.models.opt import OPTConfig, OPTForCausalLM

Config = OPTConfig | LlamaConfig

NAMES = ("prefix_keys", "prefix_values")


@dataclasses.dataclass(frozen=True)
class PrefixTuning:
  """``num_tokens`` prefix keys and values per layer (module docstring);
  MeZO uses 5."""

  num_tokens: int = 5

  def __post_init__(self):
    if self.num_tokens < 1:
      raise ValueError(f"num_tokens must be >= 1, got {self.num_tokens}")

  def model_config(self, config: Config) -> Config:
    """``config`` with the prefix attention switched on."""
    return dataclasses.replace(config, num_prefix_tokens=self.num_tokens)

  def token_ids(self, rng: jax.Array, config: Config) -> jax.Array:
    """The ``[1, P]`` random vocabulary tokens whose activations start the
    prefix (drawn from a public key)."""
    return jax.random.randint(rng, (1, self.num_tokens), 0, config.vocab_size)

  def init(self, rng: jax.Array, params, *, config: Config) -> dict:
    """Prefix adapters from the real activations of random tokens.

    ``params``: the pretrained model's (without prefix); ``config`` its
    configuration. Returns ``{"layers": {"self_attn": {"prefix_keys":
    [L, P, kv_heads * head_dim], "prefix_values": [L, P, kv_heads *
    head_dim]}}}`` in the dtype of the pretrained key projection.
    """
    plain = dataclasses.replace(config, num_prefix_tokens=0)
    if isinstance(config, LlamaConfig):
      base = LlamaForCausalLM(plain)
      heads, head_dim = config.num_key_value_heads, config.head_dim
    else:
      base = OPTForCausalLM(plain)
      heads = config.num_attention_heads
      head_dim = config.hidden_size // heads
    ids = self.token_ids(rng, config)
    p = self.num_tokens
    cache_shape = (config.num_hidden_layers, 1, p, heads, head_dim)
    dtype = params["layers"]["self_attn"]["k_proj"]["kernel"].dtype
    cache = (jnp.zeros(cache_shape, dtype), jnp.zeros(cache_shape, dtype))
    allowed = jnp.tril(jnp.ones((p, p), bool))[None]
    positions = jnp.arange(p, dtype=jnp.int32)[None]
    _, (keys, values) = base.apply(
      {"params": params},
      ids,
      positions,
      allowed,
      cache,
      0,
      method=base.decode,
    )
    flat = lambda x: x[:, 0].reshape(config.num_hidden_layers, p, -1)
    return {
      "layers": {
        "self_attn": dict(zip(NAMES, (flat(keys), flat(values)), strict=True))
      }
    }

  def merge(self, params, adapters) -> dict:
    """The prefix model's parameters: ``params`` plus the adapters."""
    return peft.merge_params(adapters, params)
