"""Which parameters a fine-tuning task trains: full, LoRA, BitFit or the head."""

from __future__ import annotations

from collections.abc import Sequence

from experiments.tasks.common import EVAL_FIELDS
from zoprivacy.models import peft

PEFT_MODES = ("full", "lora", "bitfit", "head")
# The config fields peft_args reads.
LORA_FIELDS = ("lora_rank", "lora_alpha", "lora_targets")
# The fields an encoder task fine-tuned through peft_split reads (its
# checkpoint folder, sequence length, mode, LoRA and held-out evaluation).
ENCODER_FIELDS = ("model_dir", "max_length", "peft", *LORA_FIELDS, *EVAL_FIELDS)


def peft_split(
  params: dict,
  mode: str,
  key,
  lora_rank: int = 8,
  lora_alpha: float = 16.0,
  lora_targets: str = r"(query|value)/kernel$",
  encoder_key: str = "encoder",
  head_keys: Sequence[str] = ("head",),
):
  """``(trainable, frozen, merge)`` of a ``{encoder_key: ..., <head>: ...}`` params tree.

  * ``full``: everything trainable.
  * ``head``: only the ``head_keys`` subtrees are trainable (frozen encoder).
  * ``bitfit``: the encoder's bias vectors (LayerNorm biases included) plus the head.
  * ``lora``: LoRA adapters (rank ``lora_rank``, scale ``alpha / rank``; DPZero
    uses r=8, alpha=16) on the encoder's ``lora_targets`` kernels plus the head;
    the encoder is frozen.

  ``merge(trainable, frozen)`` rebuilds the full params tree.
  """
  if mode not in PEFT_MODES:
    raise ValueError(f"peft={mode!r}; choose one of {PEFT_MODES}")
  is_head = lambda path: path[0] in head_keys
  if mode == "full":
    return params, {}, lambda t, f: t
  if mode in ("head", "bitfit"):
    pred = (
      (lambda path, leaf: is_head(path))
      if mode == "head"
      else (lambda path, leaf: is_head(path) or peft.bitfit(path, leaf))
    )
    trainable, frozen = peft.split_params(params, pred)
    return trainable, frozen, peft.merge_params
  lora = peft.LoRA(rank=lora_rank, targets=lora_targets, alpha=lora_alpha)
  adapters = lora.init(key, params[encoder_key])
  trainable = {
    "lora": adapters,
    **{k: params[k] for k in params if k in head_keys},
  }
  frozen = {k: params[k] for k in params if k not in head_keys}

  def merge(t, f):
    merged = {**f, **{k: v for k, v in t.items() if k != "lora"}}
    merged[encoder_key] = lora.merge(f[encoder_key], t["lora"])
    return merged

  return trainable, frozen, merge


def peft_args(config) -> dict:
  return dict(
    lora_rank=int(config.get("lora_rank") or 8),
    lora_alpha=float(config.get("lora_alpha") or 16.0),
    lora_targets=config.get("lora_targets") or r"(query|value)/kernel$",
  )
