"""A Llama split at a block for prompt classification: a frozen trunk whose
hidden states are computed once, and the top blocks, trained, scored by the
label words' logits at the last position.

MeZO's prompt classification (Malladi et al., 2023, Sec. 3 and App. E:
"<sentence> It was" with the label words " terrible" / " great") takes the
cross-entropy over the label words' next-token logits. Only those rows of
the LM head are needed: the logits here are ``norm(h_last) @ W[label_ids]^T``,
``[B, C]``, not the ``[B, vocab]`` head (49,152 rows for SmolLM2). Softmax
over the ``C`` label logits equals the model's next-token distribution
renormalized over the label words, so this cross-entropy is MeZO's
``train_as_classification`` objective for single-token label words.

Split. With the top ``k`` of the ``L`` blocks trained (adapters or weights)
and the bottom ``L - k`` frozen, the states entering block ``L - k`` are a
per-example function of public weights: :func:`trunk_states` computes them
once per example (the embedding alone when ``k = L``), and each training or
evaluation forward runs the ``k`` top blocks only. In the last block only
the last position reaches the logits: keys and values are computed at every
position, the query, the attention output and the MLP at the last one.

Sequences are left-padded (the last real token is the last position) and
positions count real tokens (``cumsum(mask) - 1``), as in
:class:`~zoprivacy.models.llama.LlamaForCausalLM`: with the same parameters,
:func:`label_logits` on :func:`trunk_states` equals the full model's logits
at the label words (``tests/models/test_llama_split.py``).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.models import causal_attention
from zoprivacy.models.llama import (
  LlamaConfig,
  LlamaDecoderLayer,
  LlamaMLP,
  RMSNorm,
  rotary,
)
from zoprivacy.models.opt import position_ids


def split_params(params: dict, config: LlamaConfig, trained_blocks: int):
  """``(trunk, top)``: the embedding and the bottom ``L - k`` blocks, and
  the top ``k`` blocks with the final norm (``{"layers", "norm"}``, stacked
  like :class:`LlamaForCausalLM`'s so LoRA and prefix adapters apply)."""
  total = config.num_hidden_layers
  if not 1 <= trained_blocks <= total:
    raise ValueError(
      f"trained_blocks={trained_blocks}: the model has {total} blocks; "
      f"train between 1 and {total} of them."
    )
  cut = total - trained_blocks
  layers = params["layers"]
  trunk = {
    "embed_tokens": params["embed_tokens"],
    "layers": jax.tree.map(lambda x: x[:cut], layers),
  }
  top = {"layers": jax.tree.map(lambda x: x[cut:], layers)}
  top["norm"] = params["norm"]
  return trunk, top


def with_top(params: dict, top: dict) -> dict:
  """``params`` with its top ``k`` blocks and final norm replaced by
  ``top`` (as :func:`split_params` cut them): the whole model after the
  top was trained (a stacked leaf in the wider of the two dtypes)."""
  k = jax.tree.leaves(top["layers"])[0].shape[0]
  cut = jax.tree.leaves(params["layers"])[0].shape[0] - k
  join = lambda x, t: jnp.concatenate([x[:cut], t]).astype(
    jnp.result_type(x, t)
  )
  layers = jax.tree.map(join, params["layers"], top["layers"])
  return {**params, "layers": layers, "norm": top["norm"]}


def label_rows(params: dict, config: LlamaConfig, label_ids) -> jax.Array:
  """``[C, hidden]``: the LM head's rows of the label words (the tied
  embedding's rows, or the untied head's columns)."""
  ids = np.asarray(label_ids)
  if config.tie_word_embeddings:
    return jnp.asarray(params["embed_tokens"]["embedding"])[ids]
  return jnp.asarray(params["lm_head"]["kernel"])[:, ids].T


def _positions_allowed(attention_mask):
  mask = jnp.asarray(attention_mask)
  positions = jnp.maximum(position_ids(mask), 0)
  return positions, causal_attention.allowed_keys(mask)


def run_blocks(layers: dict, config: LlamaConfig, hidden, attention_mask):
  """The blocks stacked in ``layers`` (leading axis) on ``hidden``
  ``[B, S, hidden]``, all positions, in order."""
  positions, allowed = _positions_allowed(attention_mask)
  layer = LlamaDecoderLayer(config)

  def body(x, p):
    y, _ = layer.apply({"params": p}, x, None, allowed, 0, positions)
    return y, None

  out, _ = jax.lax.scan(body, hidden, layers)
  return out


def trunk_states(trunk: dict, config: LlamaConfig, input_ids, attention_mask):
  """The states entering the first trained block, ``[B, S, hidden]``
  float32: the token embedding, then the trunk's blocks."""
  table = jnp.asarray(trunk["embed_tokens"]["embedding"])
  hidden = table[jnp.asarray(input_ids)].astype(jnp.float32)
  if jax.tree.leaves(trunk["layers"])[0].shape[0] == 0:
    return hidden
  return run_blocks(trunk["layers"], config, hidden, attention_mask)


def _last_query_attention(p: dict, config: LlamaConfig, h, mask, positions):
  """``LlamaAttention`` of the last position only, ``[B, hidden]``: its
  query against every real key (and the prefix, if the block has one).
  The computation of :class:`~zoprivacy.models.llama.LlamaAttention` for
  that query; the other queries' outputs, which no logit reads, are not
  formed."""
  c = config
  heads, kv, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
  b, s = h.shape[:2]
  q = (h[:, -1:] @ p["q_proj"]["kernel"]).reshape(b, 1, heads, hd)
  k = (h @ p["k_proj"]["kernel"]).reshape(b, s, kv, hd)
  v = (h @ p["v_proj"]["kernel"]).reshape(b, s, kv, hd)
  q = rotary(q, positions[:, -1:], c.rope_theta)
  k = rotary(k, positions, c.rope_theta)
  allowed = jnp.asarray(mask).astype(bool)[:, None, :]  # [B, 1, S]
  if c.num_prefix_tokens:
    prefix = lambda name: jnp.broadcast_to(
      p[name].reshape(c.num_prefix_tokens, kv, hd)[None],
      (b, c.num_prefix_tokens, kv, hd),
    ).astype(k.dtype)
    k = jnp.concatenate([prefix("prefix_keys"), k], axis=1)
    v = jnp.concatenate([prefix("prefix_values"), v], axis=1)
    seen = jnp.ones((b, 1, c.num_prefix_tokens), bool)
    allowed = jnp.concatenate([seen, allowed], axis=-1)
  k, v = jnp.repeat(k, heads // kv, axis=2), jnp.repeat(v, heads // kv, axis=2)
  ctx = causal_attention.attend(q, k, v, allowed, jnp.float32, hd**-0.5)
  return ctx[:, 0] @ p["o_proj"]["kernel"]


def label_logits(top: dict, config: LlamaConfig, hidden, attention_mask, rows):
  """``[B, C]`` label-word logits at the last position: the top blocks on
  the trunk's ``hidden`` states (the last block for the last position
  only), the final norm, and the label rows ``rows`` ``[C, hidden]``."""
  layers = top["layers"]
  last = jax.tree.map(lambda x: x[-1], layers)
  before = jax.tree.map(lambda x: x[:-1], layers)
  x = jnp.asarray(hidden, jnp.float32)
  if jax.tree.leaves(before)[0].shape[0]:
    x = run_blocks(before, config, x, attention_mask)
  positions, _ = _positions_allowed(attention_mask)
  norm = lambda p, y: RMSNorm(config.rms_norm_eps).apply({"params": p}, y)
  h = norm(last["input_layernorm"], x)
  x = x[:, -1] + _last_query_attention(
    last["self_attn"], config, h, attention_mask, positions
  )
  h = norm(last["post_attention_layernorm"], x)
  x = x + LlamaMLP(config).apply({"params": last["mlp"]}, h)
  h = norm(top["norm"], x)
  return h.astype(jnp.float32) @ jnp.asarray(rows, jnp.float32).T


def top_config(config: LlamaConfig, trained_blocks: int) -> LlamaConfig:
  """``config`` for a stack of ``trained_blocks`` blocks (what the adapters
  of :mod:`zoprivacy.models.prefix_tuning` read)."""
  return dataclasses.replace(config, num_hidden_layers=trained_blocks)


def precompute_states(
  trunk: dict,
  config: LlamaConfig,
  input_ids,
  attention_mask,
  *,
  start=None,
  batch_size: int = 32,
  multiple: int = 8,
  progress=None,
) -> np.ndarray:
  """:func:`trunk_states` of every row of left-padded ``input_ids`` ``[N,
  S]``, as float32 numpy ``[N, S, hidden]`` (padding positions zero).

  ``start=(states, blocks)``: the states after the trunk's first ``blocks``
  blocks, already computed (a shallower split's); only the remaining
  blocks run on them. Rows are processed by length: each batch of
  similar-length rows is cut to its longest row (rounded up to
  ``multiple``, so few shapes compile) before the blocks run. Padding
  changes no real token's state, so the result is the uncut computation's.
  ``progress(done, total)`` is called per batch.
  """
  ids, mask = np.asarray(input_ids), np.asarray(attention_mask)
  n, length = ids.shape
  first = 0 if start is None else int(start[1])
  layers = jax.tree.map(lambda x: x[first:], trunk["layers"])
  if start is not None and jax.tree.leaves(layers)[0].shape[0] == 0:
    return np.asarray(start[0], np.float32) * (mask[..., None] != 0)
  if start is None:
    compute = jax.jit(lambda p, i, m: trunk_states(p, config, i, m))
    args = lambda take, w: (trunk, ids[take, -w:], mask[take, -w:])
  else:
    compute = jax.jit(lambda p, h, m: run_blocks(p, config, h, m))
    source = np.asarray(start[0])
    args = lambda take, w: (layers, source[take, -w:], mask[take, -w:])
  out = np.zeros((n, length, config.hidden_size), np.float32)
  lengths = mask.sum(axis=1)
  order = np.argsort(lengths, kind="stable")
  for begin in range(0, n, batch_size):
    rows = order[begin : begin + batch_size]
    width = int(-(-max(int(lengths[rows].max()), 1) // multiple) * multiple)
    width = min(width, length)
    pad = batch_size - len(rows)  # keep one batch shape per width
    take = np.concatenate([rows, np.repeat(rows[:1], pad)])
    states = compute(*args(take, width))
    out[rows, length - width :] = np.asarray(states)[: len(rows)]
    if progress is not None:
      progress(min(begin + batch_size, n), n)
  return out * (mask[..., None] != 0)
