"""The zeroth-order floor of ``benchmarks/floor.py`` (two plain forwards +
one donated update pass) and its columns in ``step_cost.py`` / ``peers.py``
reports."""

import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np

BENCHMARKS = pathlib.Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS / "peers"))
sys.path.insert(0, str(BENCHMARKS))
import floor  # noqa: E402
import report  # noqa: E402  (benchmarks/peers/report.py)


def _params():
  rng = np.random.default_rng(0)
  return {
    "w": jnp.asarray(rng.normal(size=(64, 32)), jnp.float32),
    "b": jnp.asarray(rng.normal(size=(32,)), jnp.bfloat16),
  }


def test_update_pass_is_in_place_and_not_folded():
  """Each leaf read and written once, into the donated buffer (aliased
  bytes = the parameters' bytes), with ``a``, ``b`` as runtime arguments
  (a multiply-add in the compiled program, not an identity folded away)."""
  params = _params()
  one, zero = jnp.float32(1.0), jnp.float32(0.0)
  compiled = floor.update_pass.lower(params, one, zero).compile()
  nbytes = sum(x.nbytes for x in jax.tree.leaves(params))
  assert compiled.memory_analysis().alias_size_in_bytes == nbytes
  text = compiled.as_text()
  assert "multiply" in text and "add" in text
  got = floor.update_pass(
    jax.tree.map(jnp.copy, params), jnp.float32(2.0), jnp.float32(1.0)
  )
  for g, p in zip(jax.tree.leaves(got), jax.tree.leaves(params)):
    assert g.dtype == p.dtype
    np.testing.assert_allclose(
      np.asarray(g, np.float32),
      np.asarray((p * 2 + 1).astype(p.dtype), np.float32),
    )


def test_update_pass_call_keeps_the_parameters():
  params = _params()
  call = floor.update_pass_call(params)
  for _ in range(3):
    out = call()
  for g, p in zip(jax.tree.leaves(out), jax.tree.leaves(params)):
    np.testing.assert_array_equal(g, p)  # a = 1, b = 0 exactly
    assert not g.is_deleted() and not p.is_deleted()  # donated a copy


def test_floor_calls_and_floor_seconds():
  params = _params()

  def loss(p, batch):
    return jnp.sum(batch @ p["w"], axis=-1)

  batch = jnp.ones((4, 64), jnp.float32)
  calls = floor.floor_calls(loss, params, batch)
  assert set(calls) == {floor.FORWARD, floor.UPDATE}
  np.testing.assert_allclose(calls[floor.FORWARD](), loss(params, batch))
  times = {floor.FORWARD: (0.010, 0.012), floor.UPDATE: (0.001, 0.002)}
  assert floor.floor_seconds(times) == 2 * 0.012 + 0.002
  assert floor.floor_seconds(times, 0) == 2 * 0.010 + 0.001
  text = floor.floor_text(times)
  assert "20.00 / 24.00 + 1.00 / 2.00 = 21.00 / 26.00" in text


def test_peers_rows_against_the_floor_and_two_forwards():
  times = {
    report.DEFAULT: (0.050, 0.052),
    report.GHOST: (0.070, 0.078),
    floor.FORWARD: (0.010, 0.012),
    floor.UPDATE: (0.001, 0.002),
  }
  memory = {report.DEFAULT: 2**20, report.GHOST: 2**21}
  lines = report.setting_lines("wide MLP, batch 64", 10, 40, times, memory, {})
  assert any(line.startswith("Floor (two plain forwards") for line in lines)
  default = next(l for l in lines if l.startswith(f"| {report.DEFAULT} "))
  # 52 ms against a floor of 26 ms and two forwards of 24 ms
  assert "| 1.00 | 2.00 | 2.17 | 1.0 | 1.00 |" in default
  ghost = next(l for l in lines if l.startswith(f"| {report.GHOST} "))
  assert "| 3.00 | 3.25 |" in ghost
  assert not any(l.startswith("| forward") for l in lines)
