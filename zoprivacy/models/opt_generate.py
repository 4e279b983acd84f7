"""Greedy decoding with a key/value cache for :mod:`zoprivacy.models.opt`
and :mod:`zoprivacy.models.llama` (the same ``decode`` / ``logits``).

Generation tasks (SQuAD, DROP in MeZO / DP-ZO) are evaluated by greedy
decoding; the cache keeps it one token's forward pass per step, under ``jit``
with fixed shapes.

Mistral's ``sliding_window`` ``W`` is enforced here as ``transformers``
does: the token in cache slot ``i`` attends to the slots ``j`` with ``i - W
< j <= i`` (slots, not token positions: left padding counts, as in
``transformers``' masks), so prompt and continuation may be longer than the
window (the full forward pass refuses such sequences; the cache here keeps
every slot, which is memory, not a change of result).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from zoprivacy.models.opt import OPTForCausalLM, check_length, position_ids


@functools.partial(
  jax.jit,
  static_argnames=("max_new_tokens", "model"),
)
def generate(
  params,
  prompt_ids,
  prompt_mask,
  max_new_tokens: int,
  *,
  model: OPTForCausalLM,
  eos_token_id: int | None = None,
  pad_token_id: int | None = None,
) -> jax.Array:
  """Greedy decoding with a key/value cache: ``[B, max_new_tokens]`` int32.

  ``prompt_ids`` / ``prompt_mask`` ``[B, P]`` may be padded on either side
  (positions and attention follow the mask). The cache has ``P +
  max_new_tokens`` slots; new token ``k`` goes in slot ``P + k``. A sequence
  stops after it emits ``eos_token_id`` (default: the config's); its later
  entries are ``pad_token_id``. The loop (``lax.while_loop``) ends when all
  sequences have stopped or after ``max_new_tokens`` tokens.
  """
  c = model.config
  eos = c.eos_token_id if eos_token_id is None else eos_token_id
  pad = c.pad_token_id if pad_token_id is None else pad_token_id
  prompt_ids = jnp.asarray(prompt_ids, jnp.int32)
  prompt_mask = jnp.asarray(prompt_mask, jnp.int32)
  batch, prompt_len = prompt_ids.shape
  total = prompt_len + max_new_tokens
  check_length(total, c)  # the positions (the window is applied below)
  window = getattr(c, "sliding_window", None)
  heads = c.num_attention_heads  # key/value heads (grouped-query: fewer)
  kv_heads = getattr(c, "num_key_value_heads", None) or heads
  head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
  shape = (c.num_hidden_layers, batch, total, kv_heads, head_dim)
  cache = (jnp.zeros(shape, model.dtype), jnp.zeros(shape, model.dtype))
  apply = functools.partial(model.apply, {"params": params}, method="decode")

  # prefill: the prompt attends causally to its own real tokens
  kv_mask = (
    jnp.zeros((batch, total), bool)
    .at[:, :prompt_len]
    .set(prompt_mask.astype(bool))
  )
  slots = jnp.arange(total)

  def visible(query_slots):  # [Q] -> [Q, total]: causal, within the window
    keys, queries = slots[None, :], query_slots[:, None]
    seen = keys <= queries
    return seen & (keys > queries - window) if window else seen

  allowed = kv_mask[:, None, :] & visible(jnp.arange(prompt_len))
  hidden, cache = apply(prompt_ids, position_ids(prompt_mask), allowed, cache)
  last = jnp.maximum(
    prompt_len - 1 - jnp.argmax(prompt_mask[:, ::-1], axis=-1), 0
  )
  logits = model.apply(
    {"params": params}, hidden[jnp.arange(batch), last], method="logits"
  )
  token = jnp.argmax(logits, axis=-1).astype(jnp.int32)
  out = jnp.full((batch, max_new_tokens), pad, jnp.int32)
  num_real = jnp.sum(prompt_mask, axis=-1)

  def cond(state):
    k, _, _, _, _, done = state
    return (k < max_new_tokens) & ~jnp.all(done)

  def body(state):
    k, token, out, cache, kv_mask, done = state
    token = jnp.where(done, pad, token)
    out = out.at[:, k].set(token)
    done = done | (token == eos)
    slot = prompt_len + k
    kv_mask = kv_mask.at[:, slot].set(True)
    allowed = (kv_mask & visible(slot[None]))[:, None, :]
    hidden, cache = apply(
      token[:, None], (num_real + k)[:, None], allowed, cache, slot
    )
    logits = model.apply({"params": params}, hidden[:, 0], method="logits")
    token = jnp.argmax(logits, axis=-1).astype(jnp.int32)
    return k + 1, token, out, cache, kv_mask, done

  done = jnp.zeros((batch,), bool)
  state = (jnp.int32(0), token, out, cache, kv_mask, done)
  return jax.lax.while_loop(cond, body, state)[2]
