"""Deterministic "fine-tuned" models for the export tests and for the
transformers reference that ``tests/fixtures/make_export_reference.py``
computed from them once.

Every case starts from a checkpoint that ships with the tests and changes
every weight by a fixed formula (no random generator, so that the same
bytes are written wherever and whenever the cases are built):

* ``opt_lora``: the tiny OPT (``fixtures/tiny_opt``) with LoRA adapters
  (rank 4, alpha 8) on ``v_proj``, ``out_proj`` and ``fc2`` of both layers,
  ``A`` and ``B`` non-zero; exported merged (``opt_lora/merged``) and as
  PEFT adapters on the fixture (``opt_lora/adapter``).
* ``smollm2_full``: SmolLM2's shape in small, read from a GGUF file
  (``tiny_gguf.write_tiny_gguf``: query and key rows in llama.cpp's
  permuted layout, 4 query heads sharing 2 key/value heads, the embedding
  tied as SmolLM2's), every weight changed, exported in full.
"""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import tiny_gguf

from zoprivacy.models import gguf_checkpoint, hf_export, peft
from zoprivacy.models.hf_checkpoint import load_opt

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
TINY_OPT = FIXTURES / "tiny_opt"
LORA = peft.StackedLoRA(
  rank=4, alpha=8.0, targets=r"(v_proj|out_proj|fc2)/kernel$"
)
# Two rows of token ids below the 384 of both vocabularies.
INPUT_IDS = np.array(
  [[2, 10, 50, 100, 7, 300, 42, 5], [1, 11, 12, 13, 200, 15, 16, 383]],
  np.int32,
)


def _wave(shape, phase: float, scale: float) -> np.ndarray:
  """``scale * sin(0.7 j + phase)`` over the flat positions ``j``."""
  j = np.arange(int(np.prod(shape)), dtype=np.float64)
  return (scale * np.sin(0.7 * j + phase)).reshape(shape).astype(np.float32)


def changed(params: dict, scale: float = 0.02) -> dict:
  """Every leaf plus a leaf-dependent :func:`_wave` (a full fine-tune)."""
  leaves, treedef = jax.tree.flatten(params)
  out = [x + _wave(x.shape, i, scale) for i, x in enumerate(leaves)]
  return jax.tree.unflatten(treedef, [jnp.asarray(x) for x in out])


def opt_lora():
  """``(config, base params, adapters)`` of the ``opt_lora`` case."""
  config, base = load_opt(TINY_OPT)
  adapters = LORA.init(jax.random.key(0), base)
  leaves, treedef = jax.tree.flatten(adapters)
  waves = [_wave(x.shape, 3.0 + i, 0.2) for i, x in enumerate(leaves)]
  adapters = jax.tree.unflatten(treedef, [jnp.asarray(w) for w in waves])
  return config, base, adapters


def smollm2_full(tmp_dir):
  """``(config, params)`` of the ``smollm2_full`` case (its GGUF file
  written under ``tmp_dir``)."""
  path = pathlib.Path(tmp_dir) / "smollm2_shaped.gguf"
  tiny_gguf.write_tiny_gguf(path, drop=("output.weight",))
  config, params = gguf_checkpoint.load_gguf_llama(path)
  return config, changed(params)


def write_cases(out_dir) -> dict:
  """Writes every case's export under ``out_dir``; ``{case: folder}``."""
  out = pathlib.Path(out_dir)
  config, base, adapters = opt_lora()
  hf_export.save_model(
    out / "opt_lora" / "merged", LORA.merge(base, adapters), config
  )
  hf_export.save_adapter(
    out / "opt_lora" / "adapter",
    hf_export.Adapters(LORA, adapters),
    config,
    base_model=TINY_OPT,
  )
  config, params = smollm2_full(out)
  hf_export.save_model(out / "smollm2_full", params, config)
  return {
    "opt_lora": out / "opt_lora" / "merged",
    "opt_lora_adapter": out / "opt_lora" / "adapter",
    "smollm2_full": out / "smollm2_full",
  }
