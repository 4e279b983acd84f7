"""Clipping primitives: the bound holds for any input, shapes are checked."""

import jax.numpy as jnp
import numpy as np
import pytest

from zoprivacy.mechanisms import clipping


def test_scalars_nan_to_zero_inf_saturates():
  x = jnp.array([0.5, jnp.nan, jnp.inf, -jnp.inf, -3.0, 1e30])
  np.testing.assert_array_equal(
    clipping.clip_scalars(x, 2.0), [0.5, 0.0, 2.0, -2.0, -2.0, 2.0]
  )


def test_tree_clip_bounds_every_example_and_zeroes_non_finite():
  tree = {
    "w": jnp.array([[3.0, 4.0], [0.3, 0.4], [jnp.nan, 1.0]]),
    "b": jnp.array([0.0, 0.0, 0.0]),
  }
  clipped, norms = clipping.clip_tree_per_example(tree, 1.0)
  np.testing.assert_allclose(clipped["w"][0], [0.6, 0.8], rtol=1e-6)
  np.testing.assert_allclose(clipped["w"][1], [0.3, 0.4], rtol=1e-6)
  np.testing.assert_array_equal(clipped["w"][2], [0.0, 0.0])
  np.testing.assert_allclose(norms[:2], [5.0, 0.5], rtol=1e-6)


def test_shape_and_type_checks():
  with pytest.raises(AssertionError, match="different shapes"):
    clipping.two_point_scalar(
      jnp.zeros(3), jnp.zeros(4), 1e-3, "finite_difference"
    )
  with pytest.raises(AssertionError, match="shape p"):
    clipping.clip_tree_per_example(
      {"a": jnp.zeros((3, 2)), "b": jnp.zeros((4,))}, 1.0
    )
  with pytest.raises(AssertionError, match="type"):
    clipping.clip_scalars(jnp.array([1, 2]), 1)
  with pytest.raises(ValueError, match="Unknown clip_target"):
    clipping.two_point_scalar(jnp.zeros(3), jnp.zeros(3), 1e-3, "raw")
