"""Causal LM losses at ``x + scale * u`` with the perturbation added inside
the layer scan, for :mod:`zoprivacy.training.layerwise` (zeroth-order steps
without parameter copies). Models: :class:`~zoprivacy.models.opt.OPTForCausalLM`
and :class:`~zoprivacy.models.llama.LlamaForCausalLM` (Llama, Mistral).

:func:`perturbed_forward` is the model's forward pass (the same Flax
submodules) written as a ``lax.scan`` whose body receives layer ``l``'s
unperturbed parameters and ``l``, and adds ``scale * u_l``
(:meth:`zoprivacy.models.layer_perturbation.Perturbation.apply_layer`) just before using
them: only one perturbed layer is ever live (a bfloat16 stack is sliced as
its bits, :mod:`~zoprivacy.models.narrow_slices`, so XLA:CPU does not
convert it whole to float32). The small leaves outside the
scan (final norm, projections) are perturbed whole, leaf by leaf, with the
same direction function; the token embedding and an untied LM head are
perturbed where they are used (:mod:`zoprivacy.models.perturbed_head`).

Trainable subsets. ``trainable`` is the tree the direction covers (leaf
numbers in its ``jax.tree.leaves`` order, as in the generic step);
``frozen`` holds the rest and ``assemble(trainable, frozen) -> params``
rebuilds model parameters, applied to the outer part and to each layer's
slices. Full fine-tuning: ``frozen=None``; BitFit: ``peft.merge_params``;
LoRA on the stacked kernels (:class:`zoprivacy.models.peft.StackedLoRA`):
``lambda adapters, params: lora.merge(params, adapters)``.

Usage::

    zo = layerwise.layerwise_dpzero(
      perturbed_loss=causal_lm_zo.in_scan_lm_loss(model=model),
      learning_rate=a, clip=..., noise_multiplier=..., smoothing=1e-3,
      expected_batch_size=B)
    step = jax.jit(zo.step, donate_argnums=0)
    params, state = step(params, state, batch)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from zoprivacy.models import (
  causal_attention,
  chunked_head,
  layer_perturbation,
  llama,
  narrow_slices,
  opt,
  peft,
  perturbed_head,
  stacked_layers,
)
from zoprivacy.models.lm_loss import gather_positions, per_example_lm_loss

STACKED_KEY = "layers"  # the scanned submodule of both model classes
HEAD_KEY, KERNEL_KEY = "lm_head", "kernel"  # an untied head (Llama)


class Architecture(NamedTuple):
  """What the in-scan forward pass needs to know of a model class.

  ``layer(model)``: its decoder layer module (unbound). ``embed(module,
  input_ids, attention_mask, token_delta)``: the hidden states entering the
  first layer, ``token_delta`` added to the token embeddings.
  ``layer_args(attention_mask)``: the layer's arguments after ``(x, cache,
  allowed, write_index)``. ``final(module, hidden)``: the states leaving
  the last layer, ready for the LM head. ``check_length(length, config)``:
  refuses sequences longer than the model's positions.
  """

  layer: Callable[[nn.Module], nn.Module]
  embed: Callable
  layer_args: Callable
  final: Callable
  check_length: Callable


def _opt_embed(module, input_ids, attention_mask, token_delta):
  """The start of ``OPTForCausalLM.decode``."""
  x = stacked_layers.embed_lookup(module.embed_tokens, input_ids)
  if token_delta is not None:
    x = x + token_delta
  if module.config.has_projections:
    x = module.project_in(x)
  positions = opt.position_ids(attention_mask) + opt.POSITION_OFFSET
  return x + stacked_layers.embed_lookup(module.embed_positions, positions)


def _opt_final(module, hidden):
  """The end of ``OPTForCausalLM.decode``."""
  if module.config.has_final_layer_norm:
    hidden = module.final_layer_norm(hidden)
  if module.config.has_projections:
    hidden = module.project_out(hidden)
  return hidden


def _llama_embed(module, input_ids, attention_mask, token_delta):
  del attention_mask
  x = stacked_layers.embed_lookup(module.embed_tokens, input_ids)
  return x if token_delta is None else x + token_delta


ARCHITECTURES = {
  opt.OPTForCausalLM: Architecture(
    layer=lambda m: opt.OPTDecoderLayer(m.config, m.dtype, m.param_dtype),
    embed=_opt_embed,
    layer_args=lambda attention_mask: (),
    final=_opt_final,
    check_length=opt.check_length,
  ),
  llama.LlamaForCausalLM: Architecture(
    layer=lambda m: llama.LlamaDecoderLayer(m.config, m.dtype, m.param_dtype),
    embed=_llama_embed,
    layer_args=lambda mask: (jnp.maximum(opt.position_ids(mask), 0),),
    final=lambda module, hidden: module.norm(hidden),
    check_length=llama.check_length,
  ),
}


def architecture(model) -> Architecture:
  """The :class:`Architecture` of ``model`` (refuses other classes)."""
  for cls, arch in ARCHITECTURES.items():
    if isinstance(model, cls):
      return arch
  raise TypeError(
    f"No in-scan forward pass for {type(model).__name__}; use one of "
    f"{[c.__name__ for c in ARCHITECTURES]} or the generic step."
  )


def _assemble_full(trainable, frozen):
  return peft.merge_params(trainable, frozen) if frozen else trainable


def _split_head(tree: dict):
  """``(tree without lm_head's kernel, the kernel or None)``."""
  head = dict(tree.get(HEAD_KEY, {}))
  kernel = head.pop(KERNEL_KEY, None)
  rest = dict(tree)
  if kernel is not None:
    rest.pop(HEAD_KEY)
    if head:
      rest[HEAD_KEY] = head
  return rest, kernel


def _with_head(tree: dict, kernel) -> dict:
  return {
    **tree,
    HEAD_KEY: {**dict(tree.get(HEAD_KEY, {})), KERNEL_KEY: kernel},
  }


def perturbed_forward(
  trainable,
  frozen,
  input_ids,
  attention_mask,
  *,
  model: nn.Module,
  perturbation: layer_perturbation.Perturbation | None,
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
  arch, config = architecture(model), model.config
  numbers = layer_perturbation.leaf_numbers(trainable)
  t_outer, t_layers = layer_perturbation.split_stacked(trainable, STACKED_KEY)
  n_outer, n_layers = layer_perturbation.split_stacked(numbers, STACKED_KEY)
  f_outer, f_layers = layer_perturbation.split_stacked(frozen, STACKED_KEY)
  t_outer, head = _perturb_outer(t_outer, n_outer, perturbation)
  outer = {"params": assemble(t_outer, f_outer)}

  length = input_ids.shape[-1]
  arch.check_length(length, config)
  allowed = causal_attention.allowed_keys(attention_mask)
  delta = None
  if head.table is not None:
    delta = perturbed_head.token_rows_delta(
      perturbation, head.table_number, head.table, input_ids
    )
  x = model.apply(outer, input_ids, attention_mask, delta, method=arch.embed)
  x = _scan_layers(
    model,
    x,
    (t_layers, f_layers, n_layers),
    perturbation,
    assemble,
    allowed,
    attention_mask,
  )
  x = model.apply(
    outer, gather_positions(x, logit_positions), method=arch.final
  )
  return _lm_head(model, outer, x, perturbation, head, targets, vocab_chunk)


class _TrainableHead(NamedTuple):
  """A trainable token embedding ``table`` and untied LM head ``kernel``
  (None where absent or unperturbed), kept out of the whole-leaf
  perturbation, with their leaf numbers."""

  table: Any = None
  table_number: Any = None
  kernel: Any = None
  kernel_number: Any = None


def _perturb_outer(t_outer, n_outer, perturbation):
  """The trainable leaves outside the scan perturbed whole, leaf by leaf,
  except a token embedding or untied head: those are perturbed where they
  are used (their rows; the head chunk by chunk), never copied whole.
  Returns ``(t_outer, _TrainableHead)``."""
  if perturbation is None:
    return t_outer, _TrainableHead()
  t_outer, table = perturbed_head.split_embedding(t_outer)
  n_outer, table_number = perturbed_head.split_embedding(n_outer)
  t_outer, kernel = _split_head(t_outer)
  n_outer, kernel_number = _split_head(n_outer)
  t_outer = perturbation.apply(t_outer, n_outer)
  if table is not None:
    t_outer = perturbed_head.with_embedding(t_outer, table)
  if kernel is not None:
    t_outer = _with_head(t_outer, kernel)
  return t_outer, _TrainableHead(table, table_number, kernel, kernel_number)


def _scan_layers(
  model, x, layers, perturbation, assemble, allowed, attention_mask
):
  """The decoder layers as a ``lax.scan`` over ``l``: layer ``l``'s
  unperturbed slices of ``layers = (trainable, frozen, leaf numbers)``, plus
  ``scale * u_l`` (``Perturbation.apply_layer``) just before use."""
  arch = architecture(model)
  t_layers, f_layers, n_layers = layers
  layer = arch.layer(model)
  extra = arch.layer_args(attention_mask)

  def body(x, index):
    # One layer's slices, taken in the body so that a 16-bit stack is
    # never converted whole (narrow_slices); float32 from here on.
    t_layer, f_layer = narrow_slices.index_layer((t_layers, f_layers), index)
    if perturbation is not None:
      t_layer = perturbation.apply_layer(
        t_layer, n_layers, index, model.config.num_hidden_layers
      )
    params = {"params": assemble(t_layer, f_layer)}
    x, _ = layer.apply(params, x, None, allowed, 0, *extra)
    return x, None

  indices = jnp.arange(model.config.num_hidden_layers, dtype=jnp.int32)
  x, _ = jax.lax.scan(body, x, indices)
  return x


def _lm_head(model, outer, x, perturbation, head, targets, vocab_chunk):
  """The LM head on the final states ``x``: logits, or with ``targets``
  their negative log-likelihoods; a trainable head (an untied kernel, or
  the tied embedding table) perturbed by vocabulary chunks."""
  config = model.config
  tied = getattr(config, "tie_word_embeddings", True)
  if head.kernel is not None and not tied:
    rows = perturbed_head.perturbed_columns(
      perturbation, head.kernel_number, head.kernel
    )
  elif head.table is not None and tied:
    rows = perturbed_head.perturbed_rows(
      perturbation, head.table_number, head.table
    )
  elif targets is None:  # the head is not trainable
    return model.apply(outer, x, method="logits")
  else:
    return model.apply(outer, x, targets, vocab_chunk, method="token_nll")
  vocab = config.vocab_size
  if targets is None:
    return chunked_head.chunked_logits(x, rows, vocab, vocab_chunk)
  return chunked_head.chunked_nll(x, targets, rows, vocab, vocab_chunk)


class _PerturbedForward(NamedTuple):
  """Stands for the model in :func:`~zoprivacy.models.lm_loss.
  per_example_lm_loss` (which calls ``model.apply({'params': p}, ids,
  mask)``), so the loss reduction is that function's own."""

  model: nn.Module
  frozen: Any
  perturbation: layer_perturbation.Perturbation | None
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
  perturbation: layer_perturbation.Perturbation | None,
  *,
  model: nn.Module,
  assemble: Callable = _assemble_full,
  answer_window: int | None = None,
) -> jax.Array:
  """Per-example :func:`~zoprivacy.models.lm_loss.per_example_lm_loss` at
  ``assemble(trainable + scale u, frozen)``, perturbed inside the scan."""
  forward = _PerturbedForward(model, frozen, perturbation, assemble)
  return per_example_lm_loss(
    trainable, batch, model=forward, answer_window=answer_window
  )


def in_scan_lm_loss(
  *,
  model: nn.Module,
  assemble: Callable = _assemble_full,
  answer_window: int | None = None,
) -> layer_perturbation.PerturbedLoss:
  """``perturbed_loss`` for :mod:`zoprivacy.training.layerwise` steps on OPT or
  Llama/Mistral."""
  return functools.partial(
    perturbed_lm_loss,
    model=model,
    assemble=assemble,
    answer_window=answer_window,
  )
