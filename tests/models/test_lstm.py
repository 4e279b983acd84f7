import jax
import jax.numpy as jnp
import numpy as np

from zoprivacy.models.lstm import LSTMClassifier


def rbg_key(seed):
  # XLA's RngBitGenerator keys compile in a fraction of the time of threefry keys on
  # CPU, which dominates these tests' runtime; model code accepts either.
  return jax.random.key(seed, impl="rbg")


def test_lstm_shapes_padding_and_independence(assert_per_example_independent):
  model = LSTMClassifier(
    vocab_size=50, num_classes=3, embed_dim=8, hidden_size=16
  )
  tokens = jnp.array(
    [[5, 6, 7, 0, 0], [8, 9, 0, 0, 0], [4, 4, 4, 4, 4]], jnp.int32
  )
  params = jax.jit(model.init)(rbg_key(0), tokens)["params"]
  apply = jax.jit(lambda t, n=None: model.apply({"params": params}, t, n))
  fn = lambda t: model.apply({"params": params}, t)
  out = assert_per_example_independent(
    fn, tokens, lambda t, j: t.at[j, 0].set(t[j, 0] + 1)
  )
  assert out.shape == (3, 3)
  # tokens after the given length do not matter
  lengths = jnp.array([3, 2, 5])
  junk = tokens.at[0, 3:].set(11).at[1, 2:].set(12)
  np.testing.assert_allclose(apply(junk, lengths), out, atol=1e-6)
  # the padded example equals the same example unpadded
  short = apply(tokens[1:2, :2])
  np.testing.assert_allclose(short[0], out[1], atol=1e-6)


def test_lstm_two_layers():
  model = LSTMClassifier(
    vocab_size=20, num_layers=2, embed_dim=4, hidden_size=6
  )
  tokens = jnp.ones((2, 4), jnp.int32)
  params = jax.eval_shape(model.init, rbg_key(0), tokens)["params"]
  assert {"lstm0", "lstm1", "embed", "head"} == set(params)
  assert params["lstm1"]["ii"]["kernel"].shape == (
    6,
    6,
  )  # layer 2 reads layer 1's states
  assert jax.eval_shape(model.apply, {"params": params}, tokens).shape == (
    2,
    2,
  )
