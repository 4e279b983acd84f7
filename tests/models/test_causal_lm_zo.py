"""Zeroth-order steps with the perturbation inside OPT's layer scan
(zoprivacy.training.layerwise + zoprivacy.models.causal_lm_zo): the same step as
the generic materialized dpzero step with counter-hash directions, at the
memory of one layer instead of parameter copies; LoRA on stacked kernels."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoprivacy
from zoprivacy.models import causal_lm_zo, chunked_head, opt, peft
from zoprivacy.models import perturbed_head as pe
from zoprivacy.models.opt import OPTConfig, OPTForCausalLM, per_example_lm_loss
from zoprivacy.training import layerwise
from zoprivacy.zo import directions as directions_lib

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# Equivalence tolerances. The generic and in-scan losses are the same float32
# arithmetic in different XLA fusions, so they can differ by an ulp or two
# (about 5e-7 on a loss near 4); the two-point scalar divides that by
# 2 * smoothing. At smoothing 0.05 the released scalars then agree to about
# 1e-5 and the updated parameters to about 1e-6 of their size (with 1e-3
# they are 50 times further apart, though the same computation).
PRIVACY = dict(
  clip=2.0,
  noise_multiplier=1.0,
  smoothing=0.05,
  expected_batch_size=4.0,
  dataset_size=100,
  direction_key=7,
  insecure_test_noise_seed=3,
)
LEARNING_RATE = 0.1


def _opt(layers, hidden, ffn, vocab, batch_size, length, seed=0):
  config = OPTConfig(
    vocab_size=vocab,
    hidden_size=hidden,
    num_hidden_layers=layers,
    ffn_dim=ffn,
    num_attention_heads=4,
    max_position_embeddings=64,
  )
  model = OPTForCausalLM(config)
  rng = np.random.default_rng(seed)
  ids = rng.integers(3, vocab, (batch_size, length)).astype(np.int32)
  attention = np.ones((batch_size, length), np.int32)
  attention[0, :3] = 0  # left padding in example 0
  loss_mask = np.zeros((batch_size, length), np.int32)
  loss_mask[:, length // 2 :] = 1
  batch = dict(
    input_ids=jnp.asarray(ids),
    attention_mask=jnp.asarray(attention),
    loss_mask=jnp.asarray(loss_mask),
  )
  shapes = jax.eval_shape(model.init, jax.random.key(0), ids, attention)

  def draw(path, shape):  # numpy draws: no compilation
    centre = 1.0 if path[-1].key == "scale" else 0.0  # LayerNorm scales
    x = centre + rng.normal(0.0, 0.1, shape.shape)
    return jnp.asarray(x.astype(np.float32))

  params = jax.tree_util.tree_map_with_path(draw, shapes["params"])
  return model, batch, params


def _generic_step(estimator, loss):
  tx = optax.chain(estimator, optax.sgd(LEARNING_RATE))

  def step(params, state, batch):
    zeros = jax.tree.map(jnp.zeros_like, params)
    updates, state = tx.update(
      zeros, state, params, batched_loss=loss, batch=batch
    )
    return optax.apply_updates(params, updates), state

  return tx, step


def adapter_steps(model, batch, params, adapters, assemble):
  """One generic dpzero + sgd step on ``adapters`` (the frozen ``params``
  bound in the loss) and one in-scan step, from the same keys: ``(generic
  adapters, in-scan adapters, the bound loss)``."""
  loss = peft.bind_frozen(
    functools.partial(per_example_lm_loss, model=model), params, assemble
  )
  hyper = dict(PRIVACY, directions="gaussian", direction_prng="counter2")
  estimator = zoprivacy.dpzero(**hyper)
  tx, generic_step = _generic_step(estimator, loss)
  zo = layerwise.layerwise_dpzero(
    perturbed_loss=causal_lm_zo.in_scan_lm_loss(model=model, assemble=assemble),
    learning_rate=LEARNING_RATE,
    **hyper,
  )
  a_generic, _ = jax.jit(generic_step)(
    adapters, zoprivacy.init(tx, adapters), batch
  )
  a_scan, _ = jax.jit(zo.step, donate_argnums=0)(
    jax.tree.map(jnp.copy, adapters), zo.init(adapters), batch, frozen=params
  )
  return a_generic, a_scan, loss


def _max_relative_difference(a, b):
  return max(
    np.max(np.abs(x - y)) / np.max(np.abs(x))
    for x, y in zip(
      jax.tree.leaves(jax.device_get(a)), jax.tree.leaves(jax.device_get(b))
    )
  )


def test_unperturbed_loss_is_the_model_loss():
  model, batch, params = _opt(3, 16, 32, 48, 4, 12)
  expected = jax.jit(functools.partial(per_example_lm_loss, model=model))(
    params, batch
  )
  got = jax.jit(causal_lm_zo.in_scan_lm_loss(model=model))(
    params, None, batch, None
  )
  np.testing.assert_allclose(got, expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize(
  "directions, extra",
  [
    # Slow: two compilations of the generic step of a stacked model; the
    # in-scan step is checked against it on Llama in the default suite.
    pytest.param("gaussian", {}, marks=pytest.mark.slow),
    pytest.param(
      "rademacher",
      dict(
        num_queries=2, clip_target="raw_difference", direction_prng="counter2"
      ),
      marks=pytest.mark.slow,
    ),
  ],
)
def test_in_scan_step_equals_generic_counter_step(directions, extra):
  """Same keys, same test noise seed: released scalars and parameters after
  two steps agree to 1e-4 and 1e-5 relative (PRIVACY's comment)."""
  model, batch, params = _opt(3, 16, 32, 48, 4, 12)
  loss = functools.partial(per_example_lm_loss, model=model)
  # The first counter hash unless extra names the second.
  hyper = dict(PRIVACY, directions=directions, direction_prng="counter")
  hyper.update(extra)
  generic = dict(hyper)
  if "clip_target" in generic:  # DP-ZO's convention
    generic.pop("clip_target")
    estimator = zoprivacy.dp_zo(**generic)
  else:
    estimator = zoprivacy.dpzero(**generic)
  tx, generic_step = _generic_step(estimator, loss)
  zo = layerwise.layerwise_dpzero(
    perturbed_loss=causal_lm_zo.in_scan_lm_loss(model=model),
    learning_rate=LEARNING_RATE,
    **hyper,
  )
  assert zo.privacy_plan == estimator.privacy_plan
  generic_step = jax.jit(generic_step)
  in_scan_step = jax.jit(zo.step)
  p_generic, s_generic = params, zoprivacy.init(tx, params)
  p_scan, s_scan = params, zo.init(params)
  for _ in range(2):
    p_generic, s_generic = generic_step(p_generic, s_generic, batch)
    p_scan, s_scan = in_scan_step(p_scan, s_scan, batch)
    np.testing.assert_allclose(
      s_scan.released, s_generic[0].released, rtol=1e-4
    )
    assert _max_relative_difference(p_generic, p_scan) <= 1e-5
  assert _max_relative_difference(params, p_scan) > 1e-4  # it moved


def _peak_and_temp(step, *args):
  m = jax.jit(step, donate_argnums=0).lower(*args).compile().memory_analysis()
  peak = (
    m.argument_size_in_bytes
    + m.output_size_in_bytes
    + m.temp_size_in_bytes
    - m.alias_size_in_bytes
  )
  return peak, m.temp_size_in_bytes


@pytest.mark.slow  # three compilations of a 16-layer model: ~40 s
def test_in_scan_step_holds_no_parameter_copy():
  """Compiled memory (CPU, float32, 16 layers, hidden 256, ffn 1024, vocab
  512, batch 4 x 32; 12.6M parameters, 50.4 MB; one layer is 6.2% of them).
  Measured (jax 0.10.2): generic counter dpzero step peak 2.81x params,
  temporaries 1.81x (2.86x / 1.86x with 8 layers); in-scan step peak
  1.13x, temporaries 0.13x = 2.08 layers, constant in depth (0.25x = 2.08
  layers with 8 layers).
  A plain inference forward pass already holds 1.1 layers of temporaries
  (each layer's sliced weights), so the step adds about one layer over
  inference. Both steps donate the parameters."""
  model, batch, params = _opt(16, 256, 1024, 512, 4, 32)
  size = sum(x.nbytes for x in jax.tree.leaves(params))
  layer = sum(x.nbytes for x in jax.tree.leaves(params["layers"])) / 16
  loss = functools.partial(per_example_lm_loss, model=model)
  estimator = zoprivacy.dpzero(
    direction_prng="counter", directions="gaussian", **PRIVACY
  )
  tx, generic_step = _generic_step(estimator, loss)
  zo = layerwise.layerwise_dpzero(
    perturbed_loss=causal_lm_zo.in_scan_lm_loss(model=model),
    learning_rate=LEARNING_RATE,
    directions="gaussian",
    **PRIVACY,
  )
  peak_g, temp_g = _peak_and_temp(
    generic_step, params, zoprivacy.init(tx, params), batch
  )
  peak_s, temp_s = _peak_and_temp(zo.step, params, zo.init(params), batch)
  inference = jax.jit(loss).lower(params, batch).compile().memory_analysis()
  temp_inference = inference.temp_size_in_bytes
  print(
    f"generic peak {peak_g / size:.2f}x temp {temp_g / size:.2f}x; "
    f"in-scan peak {peak_s / size:.2f}x temp {temp_s / size:.2f}x "
    f"({temp_s / layer:.2f} layers); inference temp "
    f"{temp_inference / layer:.2f} layers"
  )
  assert temp_g >= 1.0 * size
  assert temp_s < 0.3 * size
  assert peak_s < 1.3 * size
  assert temp_s - temp_inference < 1.5 * layer


def test_stacked_lora_in_scan_changes_only_adapters():
  """LoRA (rank 2) on the stacked q/v kernels [L, in, out]: the in-scan
  step equals the generic step on the adapters (frozen weights bound in
  the loss) to 5e-4 relative; the frozen weights are untouched and the
  merged model's loss changes."""
  model, batch, params = _opt(3, 16, 32, 48, 4, 12)
  lora = peft.StackedLoRA(rank=2, alpha=4.0)
  adapters = lora.init(jax.random.key(5), params)
  q = adapters["layers"]["self_attn"]["q_proj"]
  assert q["lora_A"].shape == (3, 16, 2) and q["lora_B"].shape == (3, 2, 16)
  assert set(adapters["layers"]["self_attn"]) == {"q_proj", "v_proj"}
  merged = lora.merge(params, adapters)  # B = 0: the pretrained model
  np.testing.assert_array_equal(
    merged["layers"]["self_attn"]["q_proj"]["kernel"],
    params["layers"]["self_attn"]["q_proj"]["kernel"],
  )
  assemble = lambda trainable, frozen: lora.merge(frozen, trainable)
  frozen_before = jax.tree.map(np.array, params)
  a_generic, a_scan, loss = adapter_steps(
    model, batch, params, adapters, assemble
  )
  # A @ B is a batched matmul over all layers in the generic merge and a
  # per-layer one in the scan; float32 rounding divided by 2l: measured
  # 6.2e-5 relative.
  assert _max_relative_difference(a_generic, a_scan) <= 5e-4
  jax.tree.map(np.testing.assert_array_equal, params, frozen_before)
  b = a_scan["layers"]["self_attn"]["v_proj"]["lora_B"]
  assert np.max(np.abs(b)) > 1e-4  # the adapters moved
  loss = jax.jit(loss)
  before, after = loss(adapters, batch), loss(a_scan, batch)
  assert np.max(np.abs(after - before)) > 1e-6


@pytest.mark.slow  # two step compilations under load: ~25 s
def test_in_scan_mezo_equals_generic_counter_mezo():
  """MeZO (no noise, mean over real examples, 2 queries) with a padded
  slot masked out: the same parameters as the generic counter step
  (tolerances: PRIVACY's comment)."""
  model, batch, params = _opt(3, 16, 32, 48, 4, 12)
  mask = jnp.asarray([True, True, True, False])
  loss = functools.partial(per_example_lm_loss, model=model)
  hyper = dict(
    smoothing=0.05, num_queries=2, direction_key=11, direction_prng="counter"
  )
  tx = optax.chain(
    zoprivacy.mezo(**hyper),
    optax.sgd(LEARNING_RATE),
  )

  def generic_step(params, state):
    zeros = jax.tree.map(jnp.zeros_like, params)
    updates, state = tx.update(
      zeros, state, params, batched_loss=loss, batch=batch, mask=mask
    )
    return optax.apply_updates(params, updates), state

  zo = layerwise.layerwise_mezo(
    perturbed_loss=causal_lm_zo.in_scan_lm_loss(model=model),
    learning_rate=LEARNING_RATE,
    **hyper,
  )
  p_generic, s_generic = jax.jit(generic_step)(
    params, zoprivacy.init(tx, params)
  )
  p_scan, s_scan = jax.jit(zo.step)(params, zo.init(params), batch, mask=mask)
  np.testing.assert_allclose(s_scan.released, s_generic[0].released, rtol=1e-4)
  assert _max_relative_difference(p_generic, p_scan) <= 1e-5
  assert _max_relative_difference(params, p_scan) > 1e-4


def test_answer_window_gives_the_same_losses():
  """The LM head on each example's answer window only: the same losses as
  on all positions (1e-6), in the model and inside the scan, with answers
  of different lengths at different places (left and right padding)."""
  model, batch, params = _opt(2, 16, 32, 48, 4, 12)
  loss_mask = np.zeros((4, 12), np.int32)
  loss_mask[0, 9:11] = 1  # after left padding
  loss_mask[1, 3:6] = 1
  loss_mask[2, 11] = 1  # the last token
  attention = np.asarray(batch["attention_mask"]).copy()
  attention[1, 8:] = 0  # right padding
  batch = dict(
    batch,
    loss_mask=jnp.asarray(loss_mask),
    attention_mask=jnp.asarray(attention),
  )
  window = opt.answer_window(loss_mask, multiple=1)
  assert window == 3 and opt.answer_window(loss_mask) == 8
  full = jax.jit(functools.partial(per_example_lm_loss, model=model))
  windowed = jax.jit(
    functools.partial(per_example_lm_loss, model=model, answer_window=window)
  )
  expected = np.asarray(full(params, batch))
  assert expected[3] == 0 and np.all(expected[:3] > 0)  # 3 has no answer
  np.testing.assert_allclose(windowed(params, batch), expected, rtol=1e-6)
  in_scan = jax.jit(
    causal_lm_zo.in_scan_lm_loss(model=model, answer_window=window)
  )
  np.testing.assert_allclose(
    in_scan(params, None, batch, None), expected, rtol=1e-6
  )


# Slow: the in-scan equivalence (Llama, default suite) perturbs the
# embedding where it is used too.
@pytest.mark.slow
def test_embedding_perturbed_where_used_equals_the_perturbed_table():
  """Token rows and the chunked tied head (chunks of 16 over 50 rows, the
  last one overlapping) against the whole perturbed table E + l u."""
  rng = np.random.default_rng(0)
  table = jnp.asarray(rng.normal(size=(50, 8)).astype(np.float32))
  hidden = jnp.asarray(rng.normal(size=(3, 4, 8)).astype(np.float32))
  ids = jnp.asarray(rng.integers(0, 50, size=(3, 5)).astype(np.int32))
  perturbation = layerwise.Perturbation(
    "gaussian", jax.random.key(4), 0.01, "counter2"
  )
  u = directions_lib.leaf_slice(
    "gaussian", perturbation.key, 2, table.shape, table.dtype, prng="counter2"
  )
  perturbed = table + (0.01 * u).astype(table.dtype)
  rows = table[ids] + pe.token_rows_delta(perturbation, 2, table, ids)
  np.testing.assert_array_equal(rows, perturbed[ids])
  for chunk in (16, 50, 4096):
    np.testing.assert_allclose(
      chunked_head.chunked_logits(
        hidden, pe.perturbed_rows(perturbation, 2, table), 50, chunk
      ),
      hidden @ perturbed.T,
      rtol=1e-6,
      atol=1e-6,
    )
  # An untied [D, V] head kernel: its column chunks are those of W + l u.
  kernel = table.T
  w = directions_lib.leaf_slice(
    "gaussian", perturbation.key, 5, kernel.shape, kernel.dtype, prng="counter2"
  )
  perturbed_kernel = kernel + (0.01 * w).astype(kernel.dtype)
  columns = pe.perturbed_columns(perturbation, 5, kernel)
  np.testing.assert_array_equal(
    columns(jnp.int32(34), 16), perturbed_kernel[:, 34:].T
  )
  np.testing.assert_allclose(
    chunked_head.chunked_logits(hidden, columns, 50, 16),
    hidden @ perturbed_kernel,
    rtol=1e-6,
    atol=1e-6,
  )
