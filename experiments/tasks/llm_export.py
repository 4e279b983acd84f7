"""What a causal LM task exports (``python -m experiments.export``): its
LoRA, and the function that turns the run's final trainable and frozen
parameters into a :class:`zoprivacy.models.hf_export.Exportable`."""

from __future__ import annotations

import jax

from zoprivacy.models import hf_export, peft


def stacked_lora(config) -> peft.StackedLoRA:
  """The config's LoRA (``lora_rank``, ``lora_alpha``, ``lora_targets``;
  MeZO's r = 8, alpha = 16 by default)."""
  return peft.StackedLoRA(
    rank=int(config.get("lora_rank") or 8),
    alpha=float(config.get("lora_alpha") or 16.0),
    targets=config.get("lora_targets") or peft.StackedLoRA.targets,
  )


def exporter(config, model_config, merged, tokenizer, whole=None):
  """``(trainable, frozen) -> Exportable`` of a causal LM fine-tuned as
  ``config.peft`` says (None for prefix tuning, which has no Hugging Face
  model format). ``whole(part)``: the whole model's parameters from the
  trained part's (a split model's top blocks, whose adapters start at
  layer ``L - k``; default: the part is the whole)."""
  mode = config.get("peft") or "full"
  if mode not in ("full", "lora"):
    return None
  whole = whole or (lambda part: part)
  lora = stacked_lora(config) if mode == "lora" else None

  def export(trainable, frozen):
    params = whole(merged(trainable, frozen))
    if lora is None:
      return hf_export.Exportable(model_config, params, tokenizer=tokenizer)
    depth = jax.tree.leaves(trainable)[0].shape[0]
    first = model_config.num_hidden_layers - depth
    adapters = hf_export.Adapters(lora, trainable, first)
    return hf_export.Exportable(
      model_config, params, whole(frozen), adapters, tokenizer
    )

  return export
