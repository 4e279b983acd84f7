"""The zeroth-order floor of ``benchmarks/floor.py`` (one compiled program:
two plain forwards + one donated update pass), its pairing with the steps
(``benchmarks/timing.py``) and its columns in ``step_cost.py`` /
``peers.py`` reports."""

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
import timing  # noqa: E402


def _params():
  rng = np.random.default_rng(0)
  return {
    "w": jnp.asarray(rng.normal(size=(64, 32)), jnp.float32),
    "v": jnp.asarray(rng.normal(size=(32, 8)), jnp.bfloat16),
  }


def _loss(p, batch):
  hidden = jnp.tanh(batch @ p["w"])
  return jnp.sum(hidden @ p["v"].astype(jnp.float32), axis=-1)


def _dots(compiled) -> int:
  return compiled.as_text().count(" dot(")


def test_floor_program_holds_two_forwards_and_updates_in_place():
  """Two of each of the forward's products (XLA merges two identical
  forwards: the second reads the batch through its own argument), each
  parameter written once into its donated buffer, ``a`` and ``b`` runtime
  arguments."""
  params, batch = _params(), jnp.ones((4, 64), jnp.float32)
  compiled = floor.floor_lowered(_loss, params, batch).compile()
  forward = jax.jit(_loss).lower(params, batch).compile()
  merged = jax.jit(lambda p, b: (_loss(p, b), _loss(p, b)))
  assert _dots(merged.lower(params, batch).compile()) == _dots(forward) == 2
  assert _dots(compiled) == 2 * _dots(forward)
  nbytes = sum(x.nbytes for x in jax.tree.leaves(params))
  assert compiled.memory_analysis().alias_size_in_bytes == nbytes
  # p * a + b * (sum l1 - sum l2): a second batch makes g nonzero.
  other = 2 * batch
  g = jnp.sum(_loss(params, batch)) - jnp.sum(_loss(params, other))
  assert abs(float(g)) > 1.0  # a visible shift (summed in another order)
  got, (l1, l2) = floor.floor_program(_loss)(
    jax.tree.map(jnp.copy, params), batch, other, 2.0, 0.5
  )
  np.testing.assert_allclose(l1, _loss(params, batch), rtol=1e-6)
  np.testing.assert_allclose(l2, _loss(params, other), rtol=1e-6)
  for k, p in params.items():
    assert got[k].dtype == p.dtype
    want = p * jnp.asarray(2.0, p.dtype) + (0.5 * g).astype(p.dtype)
    np.testing.assert_allclose(
      np.asarray(got[k], np.float32), np.asarray(want, np.float32), atol=0.02
    )


def test_floor_call_keeps_the_parameters():
  params = _params()
  call = floor.floor_call(_loss, params, jnp.ones((4, 64), jnp.float32))
  for _ in range(3):
    out = call()
  for g, p in zip(jax.tree.leaves(out), jax.tree.leaves(params)):
    np.testing.assert_array_equal(g, p)  # a = 1, b = 0 exactly
    assert not g.is_deleted() and not p.is_deleted()  # donated a copy


def test_floor_calls_seconds_and_text():
  params, batch = _params(), jnp.ones((4, 64), jnp.float32)
  calls = floor.floor_calls(_loss, params, batch)
  assert set(calls) == {floor.FLOOR, floor.FORWARD}
  np.testing.assert_allclose(calls[floor.FORWARD](), _loss(params, batch))
  times = {floor.FLOOR: (0.020, 0.026), floor.FORWARD: (0.010, 0.012)}
  assert floor.floor_seconds(times) == 0.026
  assert floor.floor_seconds(times, 0) == 0.020
  text = floor.floor_text(times)
  assert "20.00 / 26.00; one forward called alone 10.00 / 12.00" in text
  assert "twice that 20.00 / 24.00" in text


def test_paired_round_robin_puts_the_base_before_every_call():
  order = []
  fns = {
    "base": lambda: order.append("base"),
    "a": lambda: order.append("a"),
    "b": lambda: order.append("b"),
  }
  paired = timing.paired_round_robin("base", fns, reps=3)
  timed = order[6:]  # after two warm-up calls of each
  assert timed == ["base", "a", "base", "b"] * 3
  assert set(paired.times) == set(fns) and paired.ratios["base"] == 1.0
  assert set(paired.cpu_ratios) == set(fns)
  assert all(lo <= med for lo, med in paired.times.values())


def test_peers_rows_against_the_floor():
  paired = timing.Paired(
    times={
      report.DEFAULT: (0.050, 0.052),
      report.GHOST: (0.070, 0.078),
      floor.FLOOR: (0.024, 0.026),
      floor.FORWARD: (0.010, 0.012),
    },
    ratios={report.DEFAULT: 2.0, report.GHOST: 3.0, floor.FLOOR: 1.0},
    cpu_times={},
    cpu_ratios={report.DEFAULT: 2.5, report.GHOST: 3.5, floor.FLOOR: 1.0},
  )
  memory = {report.DEFAULT: 2**20, report.GHOST: 2**21}
  lines = report.setting_lines("wide MLP, batch 64", 10, 40, paired, memory, {})
  assert any(line.startswith("Floor (one compiled program") for line in lines)
  default = next(l for l in lines if l.startswith(f"| {report.DEFAULT} "))
  assert "| 1.00 | 2.00 (2.50) | 1.0 | 1.00 |" in default
  ghost = next(l for l in lines if l.startswith(f"| {report.GHOST} "))
  assert "| 1.50 | 3.00 (3.50) | 2.0 | 2.00 |" in ghost
  assert not any(l.startswith(("| forward", "| floor")) for l in lines)
