"""The per-example contract checker: what it flags, what it lets through."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoprivacy
from zoprivacy.first_order import per_example_check as pec
from zoprivacy.models import small
from zoprivacy.zo import queries

B, D, H = 8, 6, 4
X = jax.random.normal(jax.random.key(1), (B, D))
W = jax.random.normal(jax.random.key(2), (D, H)) / np.sqrt(D)


def _per_example_quadratic(w, batch):
  return jnp.sum(jnp.tanh(batch @ w) ** 2, axis=-1) + 0.5


def _batch_norm_loss(w, batch):
  """Normalizes hidden units with the batch mean and variance."""
  h = batch @ w
  h = (h - h.mean(0)) / jnp.sqrt(h.var(0) + 1e-5)
  return jnp.sum(jnp.tanh(h) ** 2, axis=-1)


def _in_batch_negatives_loss(w, batch):
  """InfoNCE: example i's positive is b_i, the other b_k are negatives."""
  za = batch["a"] @ w
  zb = batch["b"] @ w
  za = za / jnp.linalg.norm(za, axis=-1, keepdims=True)
  zb = zb / jnp.linalg.norm(zb, axis=-1, keepdims=True)
  logits = za @ zb.T / 0.1
  return -jnp.diagonal(jax.nn.log_softmax(logits, axis=-1))


def _batch_mean_normalized_loss(w, batch):
  losses = _per_example_quadratic(w, batch)
  return losses / jnp.mean(losses)


def _jittery_loss(scale):
  """Per-example loss plus ``scale`` times a function of the whole batch.

  At ``scale = 1e-7`` this mimics float32 reduction-order noise.
  """

  def loss(w, batch):
    return _per_example_quadratic(w, batch) + scale * jnp.sin(jnp.sum(batch))

  return loss


def _report(loss, params=W, batch=X, **kw):
  return pec.check_per_example(loss, params, batch, key=0, **kw)


# ------------------------------------------------------------------ passing


def test_per_example_loss_passes():
  report = _report(_per_example_quadratic)
  assert report.ok and not report.violations
  assert report.max_change <= 1e-6
  assert len(report.probes) == 3 and len(set(report.probes)) == 3
  assert "per-example" in report.message()


class _BatchNormMLP(nn.Module):
  """Dense -> BatchNorm (batch statistics, as in training) -> Dense."""

  @nn.compact
  def __call__(self, x):
    x = nn.Dense(16)(x.reshape(x.shape[0], -1))
    x = nn.BatchNorm(use_running_average=False)(x)
    return nn.Dense(5)(nn.relu(x))


def _image_batch():
  images = jax.random.uniform(jax.random.key(3), (B, 8, 8, 1))
  return {"image": images, "label": jnp.arange(B, dtype=jnp.int32) % 5}


def test_flax_cnn_cross_entropy_passes():
  module = small.SmallCNN(num_classes=5, features=(4,))
  batch = _image_batch()
  params = module.init(jax.random.key(4), batch["image"][:1])

  def loss(p, b):
    logits = module.apply(p, b["image"])
    return optax.softmax_cross_entropy_with_integer_labels(logits, b["label"])

  report = pec.assert_per_example(loss, params, batch, key=5)
  assert report.ok and report.batch_size == B


def test_flax_batch_norm_is_flagged():
  module = _BatchNormMLP()
  batch = _image_batch()
  variables = module.init(jax.random.key(4), batch["image"])

  def loss(v, b):
    logits, _ = module.apply(v, b["image"], mutable=["batch_stats"])
    return optax.softmax_cross_entropy_with_integer_labels(logits, b["label"])

  with pytest.raises(
    pec.CrossExampleDependenceError,
    match=r"replacing example \d+ by .* moved the loss of "
    r"example \d+",
  ):
    pec.assert_per_example(loss, variables, batch, key=5)


def test_wrapped_per_example_loss_passes():
  def per_example(w, example):
    return jnp.sum(jnp.tanh(example @ w) ** 2)

  loss = queries.as_batched_loss(per_example_loss=per_example)
  assert pec.assert_per_example(loss, W, X, num_probes=B).ok


def test_float32_noise_is_tolerated_but_larger_leaks_are_not():
  assert _report(_jittery_loss(1e-7)).ok
  assert not _report(_jittery_loss(1e-3)).ok


# ------------------------------------------------------------------ flagged


@pytest.mark.parametrize(
  "loss", [_batch_norm_loss, _batch_mean_normalized_loss]
)
def test_mixing_losses_are_flagged(loss):
  report = _report(loss)
  assert not report.ok
  assert {v.probe for v in report.violations if v.check == "replace"} == set(
    report.probes
  )
  with pytest.raises(pec.CrossExampleDependenceError) as info:
    pec.assert_per_example(loss, W, X, key=0)
  assert isinstance(info.value, ValueError)
  first = report.violations[-1]
  assert first.change > first.tolerance and first.row != first.probe
  assert (
    f"replacing example {first.probe} by {first.replacement} moved "
    f"the loss of example {first.row}"
  ) in str(info.value)
  assert "batch norm" in str(info.value)


def test_in_batch_negatives_are_flagged():
  batch = {
    "a": X,
    "b": X + 0.1 * jax.random.normal(jax.random.key(6), X.shape),
  }
  report = _report(_in_batch_negatives_loss, batch=batch)
  assert not report.ok
  replaced = [v for v in report.violations if v.check == "replace"]
  assert len(replaced) == len(report.probes)
  assert all(v.num_moved == B - 1 for v in replaced)


def test_position_dependent_loss_fails_the_permutation():
  def loss(w, batch):
    return _per_example_quadratic(w, batch) * (1.0 + jnp.arange(B))

  report = _report(loss)
  assert [v.check for v in report.violations] == ["permute"]
  assert "permuting the batch did not permute the losses" in report.message()


def test_padding_probe_catches_count_of_nonzero_rows():
  """Normalizing by the number of non-zero rows only reacts to zero rows."""

  def loss(w, batch):
    nonzero = jnp.sum(jnp.any(batch != 0, axis=-1))
    return _per_example_quadratic(w, batch) * B / nonzero

  report = _report(loss)
  assert [v.replacement for v in report.violations] == ["zeros (padding)"]


def test_mask_probes_padding_and_compares_real_rows_only():
  mask = np.arange(B) < B - 1  # the last slot is padding.

  def padding_leaks(w, batch):
    return _per_example_quadratic(w, batch) + 0.1 * jnp.sum(batch[-1])

  report = _report(padding_leaks, mask=mask, num_probes=2)
  assert B - 1 in report.probes
  replaced = [v for v in report.violations if v.check == "replace"]
  assert [v.probe for v in replaced] == [B - 1]
  assert replaced[0].num_compared == B - 1  # the real rows.
  # Slot B - 1 holds another example after the permutation, too.
  assert report.violations[0].check == "permute"

  # A padding row (marked by 100 in column 0) whose loss reads real rows:
  # harmless, since padded losses are discarded, so only flagged unmasked.
  padded = X.at[B - 1, 0].set(100.0)

  def padding_reads_real(w, batch):
    extra = jnp.where(batch[:, 0] == 100.0, jnp.sum(batch[:, 1]), 0.0)
    return _per_example_quadratic(w, batch) + extra

  assert _report(padding_reads_real, batch=padded, mask=mask, num_probes=B).ok
  assert not _report(padding_reads_real, batch=padded, num_probes=B).ok


def test_nan_and_inf_losses_compare_equal_to_themselves():
  batch = X.at[1, 0].set(jnp.nan).at[2, 0].set(1e30)

  def loss(w, b):
    base = _per_example_quadratic(w, b)
    return jnp.where(b[:, 0] > 1e29, jnp.inf, base)

  before = loss(W, batch)
  assert jnp.isnan(before[1]) and jnp.isinf(before[2])
  report = _report(loss, batch=batch, num_probes=B)
  assert report.ok and report.num_nonfinite == 2
  # A NaN in the batch makes every batch-norm loss NaN, which hides the
  # mixing from probes that do not replace it: the report says so.
  hidden = _report(_batch_norm_loss, batch=batch)
  assert hidden.num_nonfinite == B
  assert "not finite" in hidden.message()


def test_bad_inputs_raise():
  with pytest.raises(ValueError, match="shape"):
    _report(lambda w, b: jnp.sum(b @ w))
  with pytest.raises(ValueError, match="leading batch axis"):
    _report(_per_example_quadratic, batch={"x": X, "y": X[:3]})
  with pytest.raises(ValueError, match="num_probes"):
    _report(_per_example_quadratic, num_probes=0)


# ------------------------------------------------------- synthetic batches


def test_synthetic_batch_keeps_shapes_dtypes_and_ranges():
  rng = np.random.default_rng(0)
  batch = {
    "image": jnp.asarray(rng.uniform(0.2, 0.9, (B, 4, 4, 3)), jnp.float32),
    "half": jnp.asarray(rng.normal(size=(B, 3)), jnp.bfloat16),
    "tokens": jnp.asarray(rng.integers(3, 51, (B, 12)), jnp.int32),
    "label": np.asarray(rng.integers(0, 10, B), np.int64),
    "valid": jnp.asarray(rng.random((B, 12)) < 0.5),
    "constant": jnp.full((B, 2), 7, jnp.int32),
  }
  fake = pec.synthetic_batch_like(batch, jax.random.key(7))
  assert jax.tree.structure(fake) == jax.tree.structure(batch)
  for name, leaf in batch.items():
    made = fake[name]
    assert made.shape == leaf.shape and made.dtype == leaf.dtype, name
    assert isinstance(made, np.ndarray) == isinstance(leaf, np.ndarray)
    lo, hi = np.asarray(leaf).min(), np.asarray(leaf).max()
    assert lo <= np.asarray(made).min() and np.asarray(made).max() <= hi, name
  for name in ("image", "half", "tokens", "label", "valid"):
    assert not np.array_equal(np.asarray(fake[name]), np.asarray(batch[name]))
  assert np.array_equal(np.asarray(fake["constant"]), batch["constant"])
  again = pec.synthetic_batch_like(batch, jax.random.key(7))
  assert all(
    np.array_equal(np.asarray(again[k]), np.asarray(fake[k])) for k in batch
  )


def test_check_on_synthetic_batch_of_token_model():
  batch = {
    "tokens": jnp.asarray(np.arange(B * 5).reshape(B, 5) % 11),
    "label": jnp.arange(B) % 3,
  }
  fake = pec.synthetic_batch_like(batch, 8)
  table = jax.random.normal(jax.random.key(9), (11, 3))

  def loss(t, b):
    logits = jnp.mean(t[b["tokens"]], axis=1)
    return optax.softmax_cross_entropy_with_integer_labels(logits, b["label"])

  assert pec.check_per_example(loss, table, fake, key=10).ok


# ------------------------------------------------------------------- cost


@pytest.mark.parametrize("num_probes", [1, 3, 5])
def test_cost_is_one_trace_and_num_probes_plus_two_passes(num_probes):
  traces = []

  def counted(w, batch):
    traces.append(batch.shape)
    return _batch_norm_loss(w, batch)

  report = _report(counted, num_probes=num_probes)
  assert not report.ok
  assert len(traces) == 1  # one trace, one jitted call.
  assert report.num_evaluations == num_probes + 2
  assert traces[0] == X.shape  # vmap hides the variant axis.


def test_probes_are_reproducible_from_the_public_key():
  first = _report(_per_example_quadratic, num_probes=4)
  again = _report(_per_example_quadratic, num_probes=4)
  other = pec.check_per_example(
    _per_example_quadratic, W, X, num_probes=4, key=jax.random.key(11)
  )
  assert first.probes == again.probes
  assert first.replacements == again.replacements
  assert other.probes != first.probes


def test_make_step_checks_the_loss_on_its_first_call_or_is_told_not_to():
  """``make_step`` refuses a loss that mixes examples before any step (as
  the runner does); ``check_per_example=False`` trusts it; a batch the check
  cannot vary row by row names that opt-out."""
  tx = zoprivacy.mezo(smoothing=1e-3)
  mixing = lambda w, b: (b @ w) - jnp.mean(b @ w)  # noqa: E731
  w, batch = (
    jnp.ones(3),
    jnp.asarray(np.random.default_rng(0).normal(size=(8, 3))),
  )
  with pytest.raises(pec.CrossExampleDependenceError) as err:
    zoprivacy.make_step(tx, mixing)(w, tx.init(w), batch)
  assert "mixes examples" in str(err.value) and "\n" not in str(err.value)
  assert not w.is_deleted()  # refused before the step ran (nothing donated)
  step = zoprivacy.make_step(tx, mixing, check_per_example=False)
  assert step(jnp.ones(3), tx.init(w), batch)[0].shape == (3,)
  ragged = {"x": batch, "scale": jnp.ones(2)}
  loss = lambda w, b: b["x"] @ w * b["scale"][0]  # noqa: E731
  with pytest.raises(ValueError, match="check_per_example=False"):
    zoprivacy.make_step(tx, loss)(w, tx.init(w), ragged)
