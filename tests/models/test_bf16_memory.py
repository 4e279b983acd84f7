"""bfloat16 stored weights halve the layer-wise step's compiled memory
(compile only, XLA:CPU; :mod:`zoprivacy.models.narrow_slices`).

A 24-layer OPT of width 64 over a 512-token vocabulary (batch 2 x 32
tokens): 24 layers like opt-1.3b, so one layer's float32 copy is as small a
share of the stack as there. Measured: in-scan forward 5.0 MiB (float32)
against 2.7 MiB (bfloat16), 0.55x; layer-wise DP-ZO step 5.3 against 2.9
MiB, 0.55x; before slicing 16-bit stacks as bits, the bfloat16 step held
float32 copies of all 16 stacked leaves (``f32[24, ...]`` values in the
entry computation) and its peak was above float32's. The opt-1.3b shape
(batch 8 x 256): tests/benchmarks/test_llm_memory.py.
"""

import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoprivacy.models import causal_lm_zo
from zoprivacy.models.opt import OPTConfig, OPTForCausalLM
from zoprivacy.training import layerwise

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "benchmarks"))
import llm_memory_bf16  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

CONFIG = OPTConfig(
  vocab_size=512,
  hidden_size=64,
  num_hidden_layers=24,
  ffn_dim=256,
  num_attention_heads=4,
  max_position_embeddings=64,
)
MAX_RATIO = 0.6


def _check(result, row):
  (f32, _), (bf16, stacks) = result["float32"][row], result["bfloat16"][row]
  assert stacks == 0, f"{stacks} float32 layer stacks outside the loop"
  assert bf16 <= MAX_RATIO * f32, (row, bf16 / f32)


def test_bf16_in_scan_forward_is_at_most_0_6_of_float32():
  row = llm_memory_bf16.PRECISION_ROWS[1]
  _check(
    llm_memory_bf16.measure_precision(
      CONFIG, 2, 32, rows=(row,), dtypes=("float32", "bfloat16")
    ),
    row,
  )


@pytest.mark.slow  # three step compilations: ~25 s
def test_runners_16bit_step_is_at_most_0_6_of_float32():
  """The runner's own full fine-tuning step (the program a run jits), in
  bfloat16 and float16."""
  row = llm_memory_bf16.RUNNER_STEP
  result = llm_memory_bf16.measure_precision(CONFIG, 2, 32, rows=(row,))
  _check(result, row)
  _check({"float32": result["float32"], "bfloat16": result["float16"]}, row)


def _tiny():
  config = OPTConfig(
    vocab_size=64,
    hidden_size=16,
    num_hidden_layers=2,
    ffn_dim=32,
    num_attention_heads=4,
    max_position_embeddings=16,
  )
  rng = np.random.default_rng(0)
  ids = jnp.asarray(rng.integers(3, 64, (2, 8)), jnp.int32)
  batch = dict(
    input_ids=ids,
    attention_mask=jnp.ones_like(ids),
    loss_mask=jnp.ones_like(ids),
  )
  model = OPTForCausalLM(config, param_dtype=jnp.bfloat16)
  params = model.init(jax.random.key(1), ids, batch["attention_mask"])
  return model, batch, params["params"]


@pytest.mark.slow  # two compilations of a perturbed loss: ~9 s unloaded
def test_bf16_weights_are_perturbed_in_float32():
  """The in-scan loss of bfloat16 weights at ``x + l u`` is the float32
  model's at ``float32(x) + l u`` (same direction), to float32 rounding:
  ``l u`` (l = 1e-3) is not rounded to bfloat16 (it would be rounded away:
  the losses at +l and -l would then be nearly equal)."""
  model, batch, params = _tiny()
  as32 = jax.tree.map(lambda x: x.astype(jnp.float32), params)
  key, scales = jax.random.key(3), jnp.asarray([1e-3, -1e-3])

  def losses(m):
    loss = causal_lm_zo.in_scan_lm_loss(model=m)
    perturbation = lambda s: layerwise.Perturbation("gaussian", key, s)
    return jax.jit(
      lambda p: jax.lax.map(
        lambda s: loss(p, None, batch, perturbation(s)), scales
      )
    )

  got = losses(model)(params)
  want = losses(OPTForCausalLM(model.config))(as32)
  np.testing.assert_allclose(got, want, rtol=2e-6)
  assert np.max(np.abs(got[0] - got[1])) > 1e-5


@pytest.mark.slow  # ~3-7 s
def test_bf16_update_is_the_float32_update_stochastically_rounded():
  """:func:`zoprivacy.training.layerwise.descend` on bfloat16 leaves:
  ``x - a s u`` in float32 with ``u`` drawn in float32, stored as one of
  its two bfloat16 neighbours (the rounding key's choice: the same key, the
  same result), about as often above as below."""
  _, _, params = _tiny()
  as32 = jax.tree.map(lambda x: x.astype(jnp.float32), params)
  keys = jax.random.split(jax.random.key(4), 1)
  scalars = jnp.asarray([30.0], jnp.float32)
  descend = jax.jit(
    lambda p, r: layerwise.descend(
      p, "gaussian", keys, scalars, 0.5, rounding_key=jax.random.key(r)
    )
  )
  got, again, want = descend(params, 7), descend(params, 7), descend(as32, 7)
  up = total = 0
  for g, a, w in zip(*map(jax.tree.leaves, (got, again, want))):
    assert g.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(g, np.float32), a)
    g, w = np.asarray(g, np.float32), np.asarray(w)
    near = jnp.asarray(w).astype(jnp.bfloat16)
    spacing = np.maximum(
      *(
        np.abs(
          np.asarray(jnp.nextafter(near, jnp.bfloat16(side)), np.float32)
          - np.asarray(near, np.float32)
        )
        for side in (np.inf, -np.inf)
      )
    )
    assert np.all(np.abs(g - w) <= spacing * 1.0001)  # a neighbour of w
    up, total = up + np.sum(g > w), total + np.sum(g != w)
  assert 0.4 < up / total < 0.6, (up, total)
