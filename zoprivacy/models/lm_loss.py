"""The teacher-forced loss of a causal LM on its answer tokens, per example.

Shared by :class:`~zoprivacy.models.opt.OPTForCausalLM`,
:class:`~zoprivacy.models.llama.LlamaForCausalLM` and the perturbed forward
passes of :mod:`zoprivacy.models.causal_lm_zo`. A model here is anything with
``model.apply({"params": p}, input_ids, attention_mask, logit_positions,
targets=None, vocab_chunk=...)`` returning logits at ``logit_positions``,
or, given ``targets``, their negative log-likelihoods computed by vocabulary
chunks (:mod:`zoprivacy.models.chunked_head`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.models import causal_attention
from zoprivacy.models.chunked_head import DEFAULT_CHUNK


def gather_positions(hidden, positions):
  """``hidden[b, positions[b, w]]`` (all of ``hidden`` when ``None``)."""
  if positions is None:
    return hidden
  return jnp.take_along_axis(hidden, positions[..., None], axis=1)


def causal_lm_call(
  model,
  input_ids,
  attention_mask=None,
  logit_positions=None,
  targets=None,
  vocab_chunk=DEFAULT_CHUNK,
):
  """``__call__`` of :class:`~zoprivacy.models.opt.OPTForCausalLM` and
  :class:`~zoprivacy.models.llama.LlamaForCausalLM`.

  Logits ``[B, S, vocab]``; with ``logit_positions`` ``[B, W]``, only at
  those positions of each sequence, ``[B, W, vocab]`` (the LM head is the
  largest activation). With ``targets`` (shaped like the positions): their
  negative log-likelihoods instead, by vocabulary chunks, without ever
  forming the logits (``model.token_nll``). The model supplies
  ``check_sequence_length``, ``positions``, ``decode``, ``logits`` and
  ``token_nll``.
  """
  if attention_mask is None:
    attention_mask = jnp.ones_like(input_ids)
  model.check_sequence_length(input_ids.shape[-1])
  allowed = causal_attention.allowed_keys(attention_mask)
  positions = model.positions(attention_mask)
  hidden, _ = model.decode(input_ids, positions, allowed)
  hidden = gather_positions(hidden, logit_positions)
  if targets is not None:
    return model.token_nll(hidden, targets, vocab_chunk)
  return model.logits(hidden)


def per_example_lm_loss(
  params,
  batch,
  *,
  model: Any,
  answer_window: int | None = None,
  vocab_chunk: int | None = DEFAULT_CHUNK,
) -> jax.Array:
  """Teacher-forced cross-entropy on the answer tokens, one value per example.

  ``batch``: ``input_ids``, ``attention_mask`` and ``loss_mask``, each
  ``[B, S]``; ``loss_mask[b, t] = 1`` marks token ``t`` as an answer token,
  predicted from tokens ``< t`` (as in MeZO / DP-ZO's prompt + answer
  fine-tuning). Reduction: for example ``b``,

      loss_b = sum_t m_bt * (-log p(x_bt | x_b,<t)) / max(1, sum_t m_bt),

  the mean over that example's own answer tokens (``m = loss_mask *
  attention_mask``, ``t >= 1``); an example without answer tokens gets 0. The
  normalizer depends on example ``b`` only, so this meets the per-example
  contract (``functools.partial(per_example_lm_loss, model=model)`` is a
  ``batched_loss``). Padding tokens, anywhere, change no loss.

  ``answer_window=W``: every example's answer tokens lie within ``W``
  consecutive positions (the caller guarantees it, e.g. with
  :func:`answer_window` on its data); the LM head then runs on the ``W``
  positions from each example's first answer token instead of all ``S``.
  The result is the same.

  ``vocab_chunk=C``: the head's ``-log p`` is computed ``C`` vocabulary rows
  at a time, so the ``[B, W, vocab]`` float32 logits never exist (with the
  window, this is what keeps a step on a 50k-token vocabulary near inference
  memory); ``None`` forms the logits and takes ``log_softmax``. The two
  agree to float32 rounding.
  """
  ids = jnp.asarray(batch["input_ids"])
  attention = jnp.asarray(batch["attention_mask"])
  m = jnp.asarray(batch["loss_mask"]) * attention
  length = ids.shape[1]
  if answer_window is None:
    predicted = jnp.arange(1, length)[None]  # every token after the first
    targets = ids[:, 1:]
    m = m[:, 1:]
  else:  # each example's own window: still per-example
    first = 1 + jnp.argmax(m[:, 1:] != 0, axis=1)  # 1 with no answer
    predicted = first[:, None] + jnp.arange(answer_window)
    inside = predicted < length
    predicted = jnp.minimum(predicted, length - 1)
    targets = jnp.take_along_axis(ids, predicted, axis=1)
    m = jnp.take_along_axis(m, predicted, axis=1) * inside
  positions = jnp.broadcast_to(predicted - 1, targets.shape)
  variables = {"params": params}
  if vocab_chunk is None:
    logits = model.apply(variables, ids, attention, positions)
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    nll = -jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
  else:
    nll = model.apply(
      variables,
      ids,
      attention,
      positions,
      targets=targets,
      vocab_chunk=vocab_chunk,
    )
  m = m.astype(jnp.float32)
  return jnp.sum(nll * m, axis=-1) / jnp.maximum(jnp.sum(m, axis=-1), 1.0)


def answer_window(loss_mask, multiple: int = 8) -> int:
  """The smallest window (a multiple of ``multiple``) that holds every
  example's answer tokens, from its first to its last, in ``loss_mask``
  ``[..., S]`` (NumPy, at data-preparation time), for
  :func:`per_example_lm_loss`."""
  mask = np.asarray(loss_mask).reshape(-1, np.shape(loss_mask)[-1]) != 0
  mask[:, 0] = False  # the first token is never predicted
  has = mask.any(axis=1)
  if not has.any():
    return 1
  first = np.argmax(mask, axis=1)
  last = mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1)
  span = int(np.max((last - first + 1)[has]))
  return -(-span // multiple) * multiple
