"""OPT losses at ``x + scale * u`` with the perturbation added inside the
layer scan, for :mod:`zoprivacy.layerwise` (zeroth-order steps without
parameter copies).

:func:`perturbed_forward` is the forward pass of :class:`~zoprivacy.models.
opt.OPTForCausalLM` (the same Flax submodules) written as a ``lax.scan``
whose body receives layer ``l``'s unperturbed parameters and ``l``, and
adds ``scale * u_l`` (:meth:`zoprivacy.layerwise.Perturbation.apply_layer`)
just before using them: only one perturbed layer is ever live. The leaves
outside the scan (embeddings, final LayerNorm, projections) are perturbed
whole, leaf by leaf, with the same direction function.

Trainable subsets. ``trainable`` is the tree the direction covers (leaf
numbers in its ``jax.tree.leaves`` order, as in the generic step);
``frozen`` holds the rest and ``assemble(trainable, frozen) -> params``
rebuilds model parameters, applied to the outer part and to each layer's
slices. Full fine-tuning: ``frozen=None``; BitFit: ``peft.merge_params``;
LoRA on the stacked kernels (:class:`zoprivacy.models.peft.StackedLoRA`):
``lambda adapters, params: lora.merge(params, adapters)``.

Usage::

    zo = layerwise.layerwise_dpzero(
      perturbed_loss=opt_zo.in_scan_lm_loss(model=model), learning_rate=a,
      clip=..., noise_multiplier=..., smoothing=1e-3, expected_batch_size=B)
    step = jax.jit(zo.step, donate_argnums=0)
    params, state = step(params, state, batch)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from zoprivacy import layerwise
from zoprivacy.models import chunked_head, peft, perturbed_embedding
from zoprivacy.models.opt import (
  POSITION_OFFSET,
  OPTDecoderLayer,
  OPTForCausalLM,
  check_length,
  gather_positions,
  per_example_lm_loss,
  position_ids,
)

STACKED_KEY = "layers"  # OPTForCausalLM's scanned submodule


def _embed(module: OPTForCausalLM, input_ids, positions, token_delta=None):
  """The start of ``OPTForCausalLM.decode``: embeddings, ``project_in``;
  ``token_delta`` is added to the token embeddings (the perturbation of
  their rows)."""
  x = module.embed_tokens(input_ids)
  if token_delta is not None:
    x = x + token_delta
  if module.config.has_projections:
    x = module.project_in(x)
  return x + module.embed_positions(positions + POSITION_OFFSET)


def _final(module: OPTForCausalLM, hidden):
  """The end of ``decode``: final LayerNorm and ``project_out``."""
  if module.config.has_final_layer_norm:
    hidden = module.final_layer_norm(hidden)
  if module.config.has_projections:
    hidden = module.project_out(hidden)
  return hidden


def _head(module: OPTForCausalLM, hidden, targets, vocab_chunk):
  """The end of ``decode`` and the tied LM head: float32 logits, or the
  targets' negative log-likelihoods by vocabulary chunks."""
  hidden = _final(module, hidden)
  if targets is None:
    return module.logits(hidden)
  return module.token_nll(hidden, targets, vocab_chunk)


def _assemble_full(trainable, frozen):
  return peft.merge_params(trainable, frozen) if frozen else trainable


def perturbed_forward(
  trainable,
  frozen,
  input_ids,
  attention_mask,
  *,
  model: OPTForCausalLM,
  perturbation: layerwise.Perturbation | None,
  assemble: Callable = _assemble_full,
  logit_positions=None,
  targets=None,
  vocab_chunk: int = chunked_head.DEFAULT_CHUNK,
):
  """``model``'s ``__call__`` at ``assemble(trainable + scale u, frozen)``,
  perturbing each layer inside the scan (module docstring): logits
  ``[B, S, vocab]``, ``[B, W, vocab]`` at ``logit_positions`` ``[B, W]``,
  or with ``targets`` ``[B, W]`` their negative log-likelihoods by
  vocabulary chunks. ``perturbation=None``: the unperturbed model."""
  config = model.config
  numbers = layerwise.leaf_numbers(trainable)
  t_outer, t_layers = layerwise.split_stacked(trainable, STACKED_KEY)
  n_outer, n_layers = layerwise.split_stacked(numbers, STACKED_KEY)
  f_outer, f_layers = layerwise.split_stacked(frozen, STACKED_KEY)
  table = number = None
  if perturbation is not None:
    # A trainable token embedding is perturbed where it is used (its
    # rows, then the head chunk by chunk), never copied whole.
    t_outer, table = perturbed_embedding.split_embedding(t_outer)
    n_outer, number = perturbed_embedding.split_embedding(n_outer)
    t_outer = perturbation.apply(t_outer, n_outer)
    if table is not None:
      t_outer = perturbed_embedding.with_embedding(t_outer, table)
  outer = {"params": assemble(t_outer, f_outer)}

  check_length(input_ids.shape[-1], config)
  mask = attention_mask.astype(bool)
  length = input_ids.shape[-1]
  allowed = jnp.tril(jnp.ones((length, length), bool))[None] & mask[:, None]
  delta = None
  if table is not None:
    delta = perturbed_embedding.token_rows_delta(
      perturbation, number, table, input_ids
    )
  x = model.apply(
    outer, input_ids, position_ids(attention_mask), delta, method=_embed
  )
  layer = OPTDecoderLayer(config, model.dtype, model.param_dtype)

  def body(x, xs):
    t_layer, f_layer, index = xs
    if perturbation is not None:
      t_layer = perturbation.apply_layer(t_layer, n_layers, index)
    params = {"params": assemble(t_layer, f_layer)}
    x, _ = layer.apply(params, x, None, allowed, 0)
    return x, None

  indices = jnp.arange(config.num_hidden_layers, dtype=jnp.int32)
  x, _ = jax.lax.scan(body, x, (t_layers, f_layers, indices))
  x = gather_positions(x, logit_positions)
  if table is None:
    return model.apply(outer, x, targets, vocab_chunk, method=_head)
  x = model.apply(outer, x, method=_final)
  if targets is None:
    return perturbed_embedding.tied_logits(
      x, table, perturbation, number, vocab_chunk
    )
  return perturbed_embedding.tied_nll(
    x, targets, table, perturbation, number, vocab_chunk
  )


class _PerturbedForward(NamedTuple):
  """Stands for the model in :func:`~zoprivacy.models.opt.
  per_example_lm_loss` (which calls ``model.apply({'params': p}, ids,
  mask)``), so the loss reduction is that function's own."""

  model: OPTForCausalLM
  frozen: Any
  perturbation: layerwise.Perturbation | None
  assemble: Callable

  def apply(
    self,
    variables,
    input_ids,
    attention_mask,
    logit_positions=None,
    targets=None,
    vocab_chunk=chunked_head.DEFAULT_CHUNK,
  ):
    return perturbed_forward(
      variables["params"],
      self.frozen,
      input_ids,
      attention_mask,
      model=self.model,
      perturbation=self.perturbation,
      assemble=self.assemble,
      logit_positions=logit_positions,
      targets=targets,
      vocab_chunk=vocab_chunk,
    )


def perturbed_lm_loss(
  trainable,
  frozen,
  batch,
  perturbation: layerwise.Perturbation | None,
  *,
  model: OPTForCausalLM,
  assemble: Callable = _assemble_full,
  answer_window: int | None = None,
) -> jax.Array:
  """Per-example :func:`~zoprivacy.models.opt.per_example_lm_loss` at
  ``assemble(trainable + scale u, frozen)``, perturbed inside the scan."""
  forward = _PerturbedForward(model, frozen, perturbation, assemble)
  return per_example_lm_loss(
    trainable, batch, model=forward, answer_window=answer_window
  )


def in_scan_lm_loss(
  *,
  model: OPTForCausalLM,
  assemble: Callable = _assemble_full,
  answer_window: int | None = None,
) -> layerwise.PerturbedLoss:
  """``perturbed_loss`` for :mod:`zoprivacy.layerwise` steps on OPT."""
  return functools.partial(
    perturbed_lm_loss,
    model=model,
    assemble=assemble,
    answer_window=answer_window,
  )
