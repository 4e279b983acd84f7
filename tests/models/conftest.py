import jax
import numpy as np
import pytest


@pytest.fixture
def assert_per_example_independent():
  """Checks that changing example j of a batch leaves every other example's
  output bit-for-bit unchanged, and that a per-example ``jax.vmap`` gives the
  batched result."""

  def check(fn, batch, perturb, j=1, atol=1e-5):
    fn = jax.jit(fn)
    out = np.asarray(fn(batch))
    changed = perturb(batch, j)
    out2 = np.asarray(fn(changed))
    others = [i for i in range(out.shape[0]) if i != j]
    np.testing.assert_array_equal(out[others], out2[others])
    assert not np.allclose(out[j], out2[j]), (
      "perturbing example j did not change its output"
    )
    per_example = jax.jit(jax.vmap(lambda x: fn(x[None])[0]))
    np.testing.assert_allclose(
      np.asarray(per_example(batch)), out, atol=atol, rtol=1e-4
    )
    return out

  return check
