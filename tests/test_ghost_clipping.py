"""Ghost clipping equals explicit per-example clipping (DP-SGD's clipped sum).

Reference: ``clipping.clip_tree_per_example`` over
``queries.per_example_gradients``, then ``mechanisms.masked_tree_sum``.
Tolerance (float32): the whole sum agrees to 1e-6 relative in L2; in every
leaf, ``||ghost - explicit||_2`` is at most 1e-6 times ``sum_i
||clip_C(g_i)||_2`` restricted to the leaf (the scale of a sum's rounding,
which matters where examples cancel, as in a head bias, or the exact sum is
zero, as in an attention key bias); per-example norms agree to 1e-6
relative.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoprivacy
from zoprivacy.estimators import base
from zoprivacy.first_order import ghost_clipping
from zoprivacy.mechanisms import clipping
from zoprivacy.mechanisms import noise as mechanisms
from zoprivacy.models import bert
from zoprivacy.models.lstm import LSTMClassifier
from zoprivacy.models.small import MLP, SmallCNN
from zoprivacy.models.vit import SelfAttention
from zoprivacy.zo import queries

RTOL = 1e-6


def explicit(loss_args, params, clip):
  per_example = queries.per_example_gradients(loss_args, params)
  clipped, norms = clipping.clip_tree_per_example(per_example, clip)
  return mechanisms.masked_tree_sum(clipped, loss_args.mask), norms


def explicit_with_scale(loss_args, params, clip):
  """:func:`explicit` and, per leaf, ``sum_i ||clip_C(g_i)||_2`` over the
  real examples."""
  per_example = queries.per_example_gradients(loss_args, params)
  clipped, norms = clipping.clip_tree_per_example(per_example, clip)
  leaf_norms = jax.tree.map(
    lambda x: jnp.linalg.norm(x.reshape(len(x), -1), axis=1), clipped
  )
  return (
    mechanisms.masked_tree_sum(clipped, loss_args.mask),
    norms,
    mechanisms.masked_tree_sum(leaf_norms, loss_args.mask),
  )


def both_paths(loss_args, params, clip):
  """Ghost and explicit ``(clipped sum, norms)`` and the explicit leaf
  scales, each under ``jax.jit``."""

  def run(fn):
    def step(params, batch, mask):
      args = loss_args._replace(batch=batch, mask=mask)
      return fn(args, params, clip)

    return jax.jit(step)(params, loss_args.batch, loss_args.mask)

  ghost = run(lambda a, p, c: ghost_clipping.clipped_gradient_sum(a, p, clip=c))
  return ghost, run(explicit_with_scale)


def assert_matches(loss_args, params, clip):
  (ghost_sum, ghost_norms), (ref_sum, ref_norms, scales) = both_paths(
    loss_args, params, clip
  )
  finite = np.isfinite(np.asarray(ref_norms))
  np.testing.assert_array_equal(np.isfinite(np.asarray(ghost_norms)), finite)
  np.testing.assert_allclose(ghost_norms[finite], ref_norms[finite], rtol=RTOL)
  diff = jax.tree.map(jnp.subtract, ghost_sum, ref_sum)
  total_err = optax.tree_utils.tree_norm(diff)
  assert total_err <= RTOL * optax.tree_utils.tree_norm(ref_sum)
  # A leaf whose gradient is zero in exact arithmetic (an attention key's
  # bias: softmax ignores a shift shared by every key) holds only rounding,
  # below float32's resolution of the whole clipped sum; both paths must
  # keep it there. Every other leaf matches to RTOL of its own scale.
  rounding = float(np.finfo(np.float32).eps) * sum(
    float(s) for s in jax.tree.leaves(scales)
  )
  for (path, err), scale in zip(
    jax.tree_util.tree_leaves_with_path(diff), jax.tree.leaves(scales)
  ):
    assert np.all(np.isfinite(err)), path
    err, scale = float(jnp.linalg.norm(err)), float(scale)
    if scale <= rounding:
      assert err <= rounding, (jax.tree_util.keystr(path), err, rounding)
    else:
      assert err / scale <= RTOL, (jax.tree_util.keystr(path), err / scale)
  return ghost_sum, ghost_norms


def classifier_args(model, x, labels, mask=None, form="per_example"):
  def per_example_loss(params, example):
    inputs, label = example
    logits = model.apply({"params": params}, inputs[None])[0]
    return optax.softmax_cross_entropy_with_integer_labels(logits, label)

  def batched_loss(params, batch):
    inputs, label = batch
    logits = model.apply({"params": params}, inputs)
    return optax.softmax_cross_entropy_with_integer_labels(logits, label)

  extra = {"batch": (x, labels), "mask": mask}
  if form == "per_example":
    extra["per_example_loss"] = per_example_loss
  else:
    extra["batched_loss"] = batched_loss
  return base.parse_extra_args(extra)


def images(n, shape=(8, 8, 1), seed=1):
  x = jax.random.normal(jax.random.key(seed), (n,) + shape)
  return x, jnp.arange(n) % 10


def test_mlp_dense_layers_match_explicit_with_padding():
  model = MLP(hidden=(32, 16))
  x, y = images(8)
  params = model.init(jax.random.key(0), x[:1])["params"]
  mask = jnp.array([1, 1, 0, 1, 1, 1, 0, 1], bool)
  x = x.at[2].set(jnp.nan)  # a padded row holding garbage
  args = classifier_args(model, x, y, mask, form="batched")
  cover = ghost_clipping.coverage(
    queries.as_per_example_loss(None, args.batched_loss), params, args.batch
  )
  assert set(cover.values()) == {"dense"}
  _, norms = assert_matches(args, params, clip=1.0)
  assert bool(jnp.isnan(norms[2]))  # reported, but contributes nothing
  assert float(jnp.min(jnp.where(mask, norms, jnp.inf))) > 1.0  # clip active


def test_cnn_conv_layers_match_explicit():
  model = SmallCNN(features=(4, 6))
  x, y = images(6)
  params = model.init(jax.random.key(0), x[:1])["params"]
  args = classifier_args(model, x, y)
  cover = ghost_clipping.coverage(args.per_example_loss, params, args.batch)
  assert cover["['Conv_0']['kernel']"] == "local"
  assert cover["['Dense_0']['kernel']"] == "dense"
  assert_matches(args, params, clip=0.5)


class TinyTransformer(nn.Module):
  """Embedding + position parameter + LayerNorm + attention + dense layers
  over the sequence axis + mean pooling + head; one Dense and one LayerNorm
  are each called twice (their per-example gradients sum over both calls)."""

  vocab: int = 7
  width: int = 8

  @nn.compact
  def __call__(self, ids):
    x = nn.Embed(self.vocab, self.width)(ids)
    pos = self.param("pos", nn.initializers.normal(0.1), ids.shape[-1:])
    norm = nn.LayerNorm(name="shared_norm")
    x = norm(x + pos[:, None])
    x = x + SelfAttention(2)(x)
    shared = nn.Dense(self.width, name="shared_dense")
    x = norm(x + shared(nn.relu(shared(x))))
    h = nn.gelu(nn.Dense(16)(x))  # T^2 = 64 <= 8 * 16: ghost norm
    h = nn.Dense(2)(h)  # T^2 = 64 > 16 * 2: per-example kernel formed
    return nn.Dense(3)(h.mean(axis=-2))


def test_sequence_model_embedding_layer_norm_and_non_finite_examples():
  model = TinyTransformer()
  ids = jax.random.randint(jax.random.key(2), (6, 8), 0, 7)  # repeated ids
  labels = jnp.arange(6) % 3
  params = model.init(jax.random.key(0), ids[:1])["params"]

  def per_example_loss(params, example):
    tokens, label, poison = example
    # poison 1: NaN loss and gradient; 2: +inf loss, finite gradient
    scale = jnp.where(poison == 1, jnp.nan, 1.0)
    logits = model.apply({"params": params}, tokens) * scale
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, label)
    return ce + jnp.where(poison == 2, jnp.inf, 0.0)

  poison = jnp.array([0, 1, 0, 2, 0, 0])
  mask = jnp.array([1, 1, 1, 1, 1, 0], bool)
  args = base.parse_extra_args(
    {
      "per_example_loss": per_example_loss,
      "batch": (ids, labels, poison),
      "mask": mask,
    }
  )
  cover = ghost_clipping.coverage(per_example_loss, params, args.batch)
  assert cover["['Embed_0']['embedding']"] == "embed"
  assert cover["['shared_norm']['scale']"] == "local"
  assert cover["['shared_dense']['kernel']"] == "dense"
  assert cover["['SelfAttention_0']['query']['kernel']"] == "dense"
  assert cover["['Dense_1']['kernel']"] == "dense"
  assert cover["['pos']"] == "per_example"  # declared in a non-leaf module
  _, norms = assert_matches(args, params, clip=0.3)
  assert bool(jnp.isnan(norms[1]))
  assert bool(jnp.all(jnp.isfinite(norms[jnp.array([0, 2, 3, 4, 5])])))


@pytest.mark.slow  # ~12 s: in CI's slow step
def test_bert_classifier_batched_loss_with_padding_tokens():
  config = bert.BertConfig(
    vocab_size=11,
    hidden_size=8,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=16,
    max_position_embeddings=6,
  )
  model = bert.BertClassifier(config, num_classes=2, pooling="mean")
  ids = jax.random.randint(jax.random.key(3), (4, 6), 1, 11)
  ids = ids.at[1, 4:].set(0)  # padding tokens
  params = model.init(jax.random.key(0), ids[:1])["params"]
  args = classifier_args(model, ids, jnp.array([0, 1, 1, 0]), form="batched")
  loss_one = queries.as_per_example_loss(None, args.batched_loss)
  cover = ghost_clipping.coverage(loss_one, params, args.batch)
  assert set(cover.values()) == {"dense", "embed", "local"}
  assert_matches(args, params, clip=0.1)


def test_parameter_used_outside_its_layer_falls_back():
  model = MLP(hidden=(8,))
  x, y = images(5)
  params = model.init(jax.random.key(0), x[:1])["params"]

  def per_example_loss(params, example):
    logits = model.apply({"params": params}, example[0][None])[0]
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, example[1])
    return ce + 0.3 * jnp.sum(jnp.square(params["Dense_0"]["kernel"]))

  args = base.parse_extra_args(
    {"per_example_loss": per_example_loss, "batch": (x, y)}
  )
  cover = ghost_clipping.coverage(per_example_loss, params, args.batch)
  assert cover["['Dense_0']['kernel']"] == "per_example"
  assert cover["['Dense_0']['bias']"] == "per_example"  # same layer
  assert cover["['Dense_1']['kernel']"] == "dense"
  assert_matches(args, params, clip=0.2)
  eager_sum, _ = ghost_clipping.clipped_gradient_sum(args, params, clip=0.2)
  jit_sum, _ = jax.jit(
    lambda p: ghost_clipping.clipped_gradient_sum(args, p, clip=0.2)
  )(params)
  for got, want in zip(jax.tree.leaves(eager_sum), jax.tree.leaves(jit_sum)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.slow  # ~10 s: in CI's slow step
def test_lstm_scan_falls_back_embedding_and_head_do_not():
  model = LSTMClassifier(vocab_size=20, embed_dim=4, hidden_size=5)
  tokens = jax.random.randint(jax.random.key(4), (5, 6), 0, 20)
  params = model.init(jax.random.key(0), tokens[:1])["params"]
  args = classifier_args(model, tokens, jnp.arange(5) % 2)
  cover = ghost_clipping.coverage(args.per_example_loss, params, args.batch)
  assert cover["['embed']['embedding']"] == "embed"
  assert cover["['head']['kernel']"] == "dense"
  assert cover["['lstm0']['hf']['kernel']"] == "per_example"  # inside scan
  assert_matches(args, params, clip=0.5)


def test_norm_pass_memory_below_explicit_for_wide_mlp():
  # Measured on CPU (jax 0.10.2): explicit path 170,524,672 bytes of temp
  # (B copies of the 669,706-parameter model: 171,444,736 bytes), ghost path
  # 992,512 bytes.
  model = MLP(hidden=(512, 512))
  x, y = images(64, shape=(28, 28, 1))
  params = model.init(jax.random.key(0), x[:1])["params"]
  args = classifier_args(model, x, y)

  def ghost(params, batch):
    return ghost_clipping.clipped_gradient_sum_of_loss(
      args.per_example_loss, params, batch, clip=1.0
    )

  def explicit_path(params, batch):
    return explicit(args._replace(batch=batch), params, 1.0)

  def temp_bytes(f):
    compiled = jax.jit(f).lower(params, args.batch).compile()
    return compiled.memory_analysis().temp_size_in_bytes

  ghost_bytes, explicit_bytes = temp_bytes(ghost), temp_bytes(explicit_path)
  per_example_bytes = 64 * sum(p.size for p in jax.tree.leaves(params)) * 4
  assert explicit_bytes >= 0.9 * per_example_bytes  # B copies of the model
  assert ghost_bytes * 20 < explicit_bytes, (ghost_bytes, explicit_bytes)


def test_dp_sgd_ghost_path_equals_explicit_path():
  """``dp_sgd(per_example_clipping='ghost')``: same update, same noise."""
  import pytest  # pylint: disable=g-import-not-at-top

  model = MLP(num_classes=3, hidden=(16,))
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(12, 5)).astype(np.float32))
  y = jnp.asarray(rng.integers(0, 3, size=12).astype(np.int32))
  params = model.init(jax.random.key(0), x[:1])
  mask = jnp.arange(12) < 10

  def loss(p, b):
    return optax.softmax_cross_entropy_with_integer_labels(
      model.apply(p, b[0]), b[1]
    )

  updates = {}
  for method in ("explicit", "ghost"):
    est = zoprivacy.dp_sgd(
      clip=0.5,
      noise_multiplier=1.0,
      expected_batch_size=10,
      insecure_test_noise_seed=3,
      per_example_clipping=method,
      noise="secure_mode",  # ghost has no exact path: same noise for both
    )
    update = jax.jit(  # as a training step runs it (eagerly: 4x slower)
      lambda p, s, est=est: est.update(
        jax.tree.map(jnp.zeros_like, p),
        s,
        p,
        batched_loss=loss,
        batch=(x, y),
        mask=mask,
      )
    )
    updates[method], _ = update(params, zoprivacy.init(est, params))
  for g, e in zip(
    jax.tree.leaves(updates["ghost"]), jax.tree.leaves(updates["explicit"])
  ):
    np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match="per_example_clipping"):
    zoprivacy.dp_sgd(
      clip=1.0,
      noise_multiplier=1.0,
      expected_batch_size=10,
      per_example_clipping="fast",
    )
