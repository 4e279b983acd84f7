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
  cache = _empty_cache(c, batch, total, model.dtype)
  apply = functools.partial(model.apply, {"params": params}, method="decode")
  greedy = functools.partial(_greedy, model, params)
  visible = functools.partial(_visible, jnp.arange(total), window=window)

  # prefill: the prompt attends causally to its own real tokens
  kv_mask = (
    jnp.zeros((batch, total), bool)
    .at[:, :prompt_len]
    .set(prompt_mask.astype(bool))
  )
  fns = (apply, greedy, visible)
  token, cache = _prefill(fns, prompt_ids, prompt_mask, kv_mask, cache)
  return _decode(
    fns,
    token,
    cache,
    kv_mask,
    num_real=jnp.sum(prompt_mask, axis=-1),
    prompt_len=prompt_len,
    max_new_tokens=max_new_tokens,
    eos=eos,
    pad=pad,
  )


def _empty_cache(config, batch, total, dtype):
  """The zero key/value cache, each ``[layers, B, total, kv_heads,
  head_dim]`` (grouped-query attention: fewer key/value heads)."""
  heads = config.num_attention_heads  # key/value heads (grouped-query: fewer)
  kv_heads = getattr(config, "num_key_value_heads", None) or heads
  head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
  shape = (config.num_hidden_layers, batch, total, kv_heads, head_dim)
  return jnp.zeros(shape, dtype), jnp.zeros(shape, dtype)


def _visible(slots, query_slots, window):
  """``[Q] -> [Q, total]``: causal, within the sliding window (if any)."""
  keys, queries = slots[None, :], query_slots[:, None]
  seen = keys <= queries
  return seen & (keys > queries - window) if window else seen


def _greedy(model, params, hidden):
  """The greedy next token ``[B]`` int32 from the hidden states ``[B, H]``."""
  logits = model.apply({"params": params}, hidden, method="logits")
  return jnp.argmax(logits, axis=-1).astype(jnp.int32)


def _prefill(fns, prompt_ids, prompt_mask, kv_mask, cache):
  """The prompt's forward pass into the cache: the first new token (from
  each row's last real prompt token) and the filled cache. ``fns``:
  ``(apply, greedy, visible)`` of :func:`generate`."""
  apply, greedy, visible = fns
  batch, prompt_len = prompt_ids.shape
  allowed = kv_mask[:, None, :] & visible(jnp.arange(prompt_len))
  hidden, cache = apply(prompt_ids, position_ids(prompt_mask), allowed, cache)
  last = jnp.maximum(
    prompt_len - 1 - jnp.argmax(prompt_mask[:, ::-1], axis=-1), 0
  )
  return greedy(hidden[jnp.arange(batch), last]), cache


def _decode(
  fns,
  token,
  cache,
  kv_mask,
  *,
  num_real,
  prompt_len,
  max_new_tokens,
  eos,
  pad,
):
  """The greedy loop: one cached forward pass per new token (slot
  ``prompt_len + k``) until every sequence has emitted ``eos`` or
  ``max_new_tokens`` tokens; the ``[B, max_new_tokens]`` tokens."""
  apply, greedy, visible = fns
  batch = token.shape[0]
  out = jnp.full((batch, max_new_tokens), pad, jnp.int32)

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
    return k + 1, greedy(hidden[:, 0]), out, cache, kv_mask, done

  done = jnp.zeros((batch,), bool)
  state = (jnp.int32(0), token, out, cache, kv_mask, done)
  return jax.lax.while_loop(cond, body, state)[2]
