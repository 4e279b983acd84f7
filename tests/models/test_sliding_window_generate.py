"""Mistral's sliding window in KV-cache generation, against transformers.

``tests/fixtures/tiny_mistral/sliding_window.npz`` holds what
``transformers``' ``generate(do_sample=False)`` decodes from the tiny
Mistral with ``sliding_window=6``: 40 new tokens after an 8-token prompt
and after a 5-token left-padded one, so every sequence is longer than the
window (written by ``make_tiny_llama.py --sliding-window``, with eager and
SDPA attention agreeing; nothing here needs torch).
"""

import dataclasses
import pathlib

import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("safetensors")

from zoprivacy.models.hf_llama import load_llama  # noqa: E402
from zoprivacy.models.llama import LlamaForCausalLM  # noqa: E402
from zoprivacy.models.opt_generate import generate  # noqa: E402

FIXTURE = pathlib.Path(__file__).parents[1] / "fixtures" / "tiny_mistral"


@pytest.fixture(scope="module")
def mistral():
  config, params = load_llama(FIXTURE)
  with np.load(FIXTURE / "sliding_window.npz") as data:
    reference = {k: data[k] for k in data.files}
  return config, params, reference


def _generate(config, params, reference, window):
  model = LlamaForCausalLM(dataclasses.replace(config, sliding_window=window))
  return np.asarray(
    generate(
      params,
      jnp.asarray(reference["prompt"], jnp.int32),
      jnp.asarray(reference["prompt_mask"], jnp.int32),
      reference["greedy"].shape[1],
      model=model,
      eos_token_id=-1,  # transformers ran with min_new_tokens: no stop
    )
  )


def test_window_shorter_than_the_sequence_matches_transformers(mistral):
  config, params, reference = mistral
  window = int(reference["window"])
  assert window == 6 and reference["prompt"].shape == (2, 8)
  assert reference["greedy"].shape == (2, 40)
  assert reference["prompt_mask"][1].tolist() == [0, 0, 0, 1, 1, 1, 1, 1]
  got = _generate(config, params, reference, window)
  matches = (got == reference["greedy"]).sum(axis=1)
  assert matches.tolist() == [40, 40], got.tolist()


def test_the_window_changes_the_continuation(mistral):
  """Without the window (4,096 > every sequence) the greedy tokens differ
  from the windowed reference: the test above can fail."""
  config, params, reference = mistral
  assert config.sliding_window == 4096
  full = _generate(config, params, reference, None)
  assert (full != reference["greedy"]).any(axis=1).all()
