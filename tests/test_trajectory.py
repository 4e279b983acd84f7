"""Trajectory log (DP-ZO Sec. 5): exact replay, size, no secret, integrity."""

import dataclasses
import hashlib
import json
import pathlib
import struct

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoprivacy
from configs import default
from experiments import trajectory_log as replay_command
from experiments.run import settings, train, trajectory_log
from zoprivacy.privacy import randomness
from zoprivacy.training import trajectory
from zoprivacy.zo import directions as directions_lib

_RNG = np.random.default_rng(0)
X = jnp.asarray(_RNG.normal(size=(64, 10)), jnp.float32)
Y = jnp.asarray(_RNG.integers(0, 3, 64))
PARAMS = {"w": jnp.zeros((10, 3)), "b": jnp.zeros(3)}


def _loss(p, batch):
  x, y = batch
  logits = x @ p["w"] + p["b"]
  return -jax.nn.log_softmax(logits)[jnp.arange(y.shape[0]), y]


def _estimator(name, num_queries, **directions):
  kw = dict(directions="gaussian", num_queries=num_queries, direction_key=3)
  kw.update(directions)
  if name != "mezo":
    kw.update(
      clip=1.0,
      noise_multiplier=1.0,
      smoothing=1e-3,
      expected_batch_size=32,
      dataset_size=64,
      insecure_test_noise_seed=1,
    )
  return getattr(zoprivacy, name)(**kw)


def _train(name, optimizer, num_steps, num_queries=1, **directions):
  """A jitted training run that logs every step; returns (params, log,
  final optimizer state). ``directions``: ``directions=`` and
  ``direction_prng=`` of the estimator (default Gaussian, 'auto')."""
  tx = optax.chain(_estimator(name, num_queries, **directions), optimizer)
  opt_state = zoprivacy.init(tx, PARAMS)

  @jax.jit
  def step(p, s):
    zeros = jax.tree.map(jnp.zeros_like, p)
    u, s = tx.update(zeros, s, p, batched_loss=_loss, batch=(X, Y))
    return optax.apply_updates(p, u), s

  logger = trajectory.TrajectoryLogger(
    estimator=name,
    estimator_kwargs={
      "directions": "gaussian",
      "num_queries": num_queries,
      **directions,
    },
    params=PARAMS,
  )
  params = PARAMS
  for _ in range(num_steps):
    params, opt_state = step(params, opt_state)
    logger.append(opt_state)
  return params, logger.log(), opt_state


def _assert_bit_identical(a, b):
  for name in a:
    np.testing.assert_array_equal(np.asarray(a[name]), np.asarray(b[name]))
    assert np.asarray(a[name]).tobytes() == np.asarray(b[name]).tobytes()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_sgd_replay_of_1000_steps_is_bit_identical():
  trained, log, _ = _train("dp_zo", optax.sgd(0.05), 1000)
  assert log.scalars.shape == (1000, 1)
  loaded = trajectory.TrajectoryLog.from_bytes(log.to_bytes())
  replayed, _ = trajectory.replay(PARAMS, loaded, optax.sgd(0.05))
  _assert_bit_identical(trained, replayed)
  # The run moved: the comparison is not of two zero trees.
  assert float(jnp.abs(trained["w"]).max()) > 1e-3


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", ["mezo", "dpzero"])
def test_sgd_replay_other_scalar_estimators(name):
  trained, log, _ = _train(name, optax.sgd(0.05), 200)
  replayed, _ = trajectory.replay(PARAMS, log, optax.sgd(0.05))
  _assert_bit_identical(trained, replayed)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("prng", directions_lib.COUNTER_PRNGS)
@pytest.mark.parametrize("num_queries", [1, 3])
def test_counter_sphere_replay_is_bit_identical(num_queries, prng):
  # Replay recomputes each query's sphere norm (direction_scales) and
  # regenerates u leaf by leaf, as the training step did.
  kw = dict(directions="sphere", direction_prng=prng)
  trained, log, _ = _train("dpzero", optax.sgd(0.05), 50, num_queries, **kw)
  replayed, _ = trajectory.replay(PARAMS, log, optax.sgd(0.05))
  _assert_bit_identical(trained, replayed)
  assert float(jnp.abs(trained["w"]).max()) > 1e-3


def _default_run(params, features, num_steps, **options):
  """``num_steps`` of dpzero with no direction option (its defaults: sphere
  directions, ``direction_prng='auto'``) or ``options``, logged; returns
  (params, log)."""
  rng = np.random.default_rng(1)
  x = jnp.asarray(rng.normal(size=(64, features)), jnp.float32)
  kw = dict(
    clip=1.0,
    noise_multiplier=1.0,
    smoothing=1e-3,
    expected_batch_size=32,
    dataset_size=64,
    insecure_test_noise_seed=1,
    **options,
  )
  tx = optax.chain(zoprivacy.dpzero(**kw), optax.sgd(0.05))
  opt_state = zoprivacy.init(tx, params)

  @jax.jit
  def step(p, s):
    zeros = jax.tree.map(jnp.zeros_like, p)
    u, s = tx.update(zeros, s, p, batched_loss=_loss, batch=(x, Y))
    return optax.apply_updates(p, u), s

  logger = trajectory.TrajectoryLogger(
    estimator="dpzero", estimator_kwargs=kw, params=params
  )
  for _ in range(num_steps):
    params, opt_state = step(params, opt_state)
    logger.append(opt_state)
  return params, logger.log()


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
  "features, width, chosen, backend, leafwise",
  [
    (10, 3, "threefry", "cpu", False),  # 33 parameters
    (64, 1024, "counter2", "cpu", True),  # 66,560 parameters
    (64, 1024, "counter2", "gpu", False),  # the structure of a GPU or mesh
  ],
  ids=["threefry", "counter-leaf-by-leaf", "counter-whole-tree"],
)
def test_default_run_is_deterministic_recorded_and_replays_bit_identically(
  features, width, chosen, backend, leafwise, monkeypatch
):
  params = {"w": jnp.zeros((features, width)), "b": jnp.zeros(width)}
  # The generator is a function of the shapes; the structure also of the
  # backend and device count (it changes no draw).
  monkeypatch.setattr(jax, "default_backend", lambda: backend)
  assert directions_lib.generator("auto", params) == chosen
  assert directions_lib.perturbs_leafwise("auto", params) is leafwise
  trained, log = _default_run(params, features, 30)
  again, log_again = _default_run(params, features, 30)
  assert log.to_bytes() == log_again.to_bytes()  # deterministic
  _assert_bit_identical(trained, again)
  # The log records the generator that was chosen, not 'auto'.
  assert log.header["direction_prng"] == chosen
  assert log.header["directions"] == "sphere"
  loaded = trajectory.TrajectoryLog.from_bytes(log.to_bytes())
  replayed, _ = trajectory.replay(params, loaded, optax.sgd(0.05))
  _assert_bit_identical(trained, replayed)
  assert float(jnp.abs(trained["w"]).max()) > 1e-4


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_log_of_the_first_counter_hash_still_replays_bit_identically():
  # A run logged when 'auto' drew a large model's directions with the first
  # counter hash records 'counter': its replay regenerates those draws
  # although 'auto' now draws with 'counter2', and a run resumed from it
  # with the default is refused with the option that continues it.
  params = {"w": jnp.zeros((64, 1024)), "b": jnp.zeros(1024)}
  assert directions_lib.generator("auto", params) == "counter2"
  trained, log = _default_run(params, 64, 20, direction_prng="counter")
  assert log.header["direction_prng"] == "counter"
  loaded = trajectory.TrajectoryLog.from_bytes(log.to_bytes())
  replayed, _ = trajectory.replay(params, loaded, optax.sgd(0.05))
  _assert_bit_identical(trained, replayed)
  # The recorded name decides the draws: read as the second hash's log,
  # the same scalars move the parameters elsewhere.
  other = dataclasses.replace(
    loaded, header={**loaded.header, "direction_prng": "counter2"}
  )
  moved, _ = trajectory.replay(params, other, optax.sgd(0.05))
  assert not np.allclose(np.asarray(moved["w"]), np.asarray(trained["w"]))
  resumed = trajectory.TrajectoryLogger(
    estimator="dpzero", estimator_kwargs={}, params=params
  )
  with pytest.raises(
    trajectory.TrajectoryLogError, match="direction_prng='counter'"
  ):
    resumed.resume_from(loaded)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
  "optimizer",
  [optax.adam(1e-2), optax.sgd(0.05, momentum=0.9)],
  ids=["adam", "momentum"],
)
@pytest.mark.parametrize(
  "num_queries", [pytest.param(2, marks=pytest.mark.slow), 3]
)
def test_stateful_optimizers_replay_bit_identical_with_several_queries(
  optimizer, num_queries
):
  # With q > 1 the gradient is accumulated in a lax.scan in training and
  # replay alike, so the optimizer reads the same materialized gradient.
  trained, log, state = _train("dpzero", optimizer, 100, num_queries)
  replayed, opt_state = trajectory.replay(PARAMS, log, optimizer)
  _assert_bit_identical(trained, replayed)
  for a, b in zip(jax.tree.leaves(state[1]), jax.tree.leaves(opt_state)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
  "optimizer",
  [optax.adam(1e-2), optax.sgd(0.05, momentum=0.9)],
  ids=["adam", "momentum"],
)
def test_stateful_optimizers_with_one_query_replay_to_rounding(optimizer):
  # q = 1: XLA fuses s u into the optimizer's own update in the training
  # step, where it contracts (FMA) differently from the replay step; the
  # difference is one rounding per step (measured: max 3e-7 after 100
  # steps), not a different trajectory.
  trained, log, _ = _train("dpzero", optimizer, 100)
  replayed, _ = trajectory.replay(PARAMS, log, optimizer)
  for name in trained:
    np.testing.assert_allclose(
      np.asarray(replayed[name]), np.asarray(trained[name]), atol=1e-5
    )


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("num_queries", [1, 3])
def test_log_costs_4q_bytes_per_step_plus_a_constant_header(num_queries):
  _, log, _ = _train("dpzero", optax.sgd(0.05), 30, num_queries)
  sizes = [len(log.truncated(t).to_bytes()) for t in (10, 20, 30)]
  assert log.bytes_per_step == 4 * num_queries
  assert sizes[1] - sizes[0] == sizes[2] - sizes[1] == 10 * 4 * num_queries
  header = sizes[0] - 10 * 4 * num_queries
  assert header < 1024  # magic, length, JSON header, SHA-256 digest


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_log_holds_no_secret_and_only_public_fields(tmp_path):
  _, log, state = _train("dp_zo", optax.sgd(0.05), 50)
  path = tmp_path / "trajectory.bin"
  log.save(str(path))
  raw = path.read_bytes()
  est = trajectory.find_estimator_state(state)
  noise_key = np.asarray(jax.random.key_data(est.noise_key)).tobytes()
  assert len(noise_key) == 16
  secret = randomness.insecure_test_secret(1)  # the test noise's secret
  for needle in (noise_key, noise_key[:8], noise_key[8:], secret):
    assert needle not in raw
    assert needle.hex().encode() not in raw
  header = trajectory.TrajectoryLog.load(str(path)).header
  assert set(header) == trajectory.HEADER_KEYS
  assert set(trajectory.HEADER_KEYS) == {
    "format_version",
    "estimator",
    "directions",
    "direction_prng",
    "num_queries",
    "direction_key_impl",
    "direction_key_data",
    "params_tree",
    "params_leaves",
    "first_step",
    "num_steps",
    "privacy_note",
  }
  # The direction key is public and is what the header carries.
  direction = np.asarray(jax.random.key_data(est.direction_key))
  assert header["direction_key_data"] == direction.ravel().tolist()
  # Parameters: shapes and dtypes only, never values.
  assert header["params_leaves"] == [[[3], "float32"], [[10, 3], "float32"]]


def _rewrite(raw: bytes, header_update: dict) -> bytes:
  """A well-formed file (valid digest) with an edited header."""
  (length,) = struct.unpack("<I", raw[8:12])
  header = json.loads(raw[12 : 12 + length])
  header.update(header_update)
  text = json.dumps(header).encode()
  body = raw[:8] + struct.pack("<I", len(text)) + text
  body += raw[12 + length : -32]
  return body + hashlib.sha256(body).digest()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_corrupted_or_truncated_log_is_detected():
  _, log, _ = _train("dpzero", optax.sgd(0.05), 20)
  raw = log.to_bytes()
  assert trajectory.TrajectoryLog.from_bytes(raw).scalars.tobytes() == (
    log.scalars.tobytes()
  )
  flipped = bytearray(raw)
  flipped[len(raw) - 40] ^= 0x01  # one bit of the last scalar
  bad = [
    bytes(flipped),
    raw[:-4],
    raw[: len(raw) // 2],
    raw[:10],
    b"NOTALOG!" + raw[8:],
    _rewrite(raw, {"num_steps": 21}),  # digest fine, sizes disagree
    _rewrite(raw, {"noise_key": [1, 2, 3, 4]}),  # not an allowed field
    _rewrite(raw, {"estimator": "dp_sgd"}),  # not replayable
    _rewrite(raw, {"format_version": 2}),
  ]
  for corrupt in bad:
    with pytest.raises(trajectory.TrajectoryLogError):
      trajectory.TrajectoryLog.from_bytes(corrupt)


def test_other_estimators_are_refused_with_a_reason():
  for name in ("dp_sgd", "pazo_m", "noisy_zogd"):
    with pytest.raises(trajectory.TrajectoryLogError, match="scalar"):
      trajectory.TrajectoryLogger(estimator=name, params=PARAMS)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_replay_refuses_other_parameters_and_skipped_steps():
  _, log, _ = _train("dpzero", optax.sgd(0.05), 3)
  with pytest.raises(trajectory.TrajectoryLogError, match="parameter tree"):
    trajectory.replay({"w": jnp.zeros((10, 3))}, log, optax.sgd(0.05))
  tx = optax.chain(_estimator("dpzero", 1), optax.sgd(0.05))
  state = zoprivacy.init(tx, PARAMS)
  logger = trajectory.TrajectoryLogger(estimator="dpzero", params=PARAMS)
  step = jax.jit(
    lambda p, s: tx.update(p, s, p, batched_loss=_loss, batch=(X, Y))[1]
  )
  state = step(PARAMS, state)
  logger.append(state)
  state = step(PARAMS, step(PARAMS, state))  # one step not appended
  logger.append(state)
  with pytest.raises(trajectory.TrajectoryLogError, match="append once"):
    logger.log()


def _runner_config(workdir, **overrides):
  c = default.get_config()
  c.num_steps = 40
  c.eval_every = 0
  c.checkpoint_every = 20
  c.check_per_example = False
  c.workdir = str(workdir)
  c.trajectory_log = True
  for k, v in overrides.items():
    setattr(c, k, v)
  return c


def test_runner_log_survives_resume_and_replays_to_the_result(tmp_path):
  config = _runner_config(tmp_path)
  part = train.train(config, progress=False, stop_after=20)
  assert part["interrupted_at"] == 20
  assert trajectory.TrajectoryLog.load(
    str(tmp_path / "trajectory.bin")
  ).scalars.shape == (20, 1)
  result = train.train(config, progress=False)
  log = trajectory.TrajectoryLog.load(str(tmp_path / "trajectory.bin"))
  assert log.scalars.shape == (40, 1)
  replayed = replay_command.replay_run(config, log)
  assert replayed["params_sha256"] == result["params_sha256"]
  assert replayed["test_accuracy"] == result["test_accuracy"]


def test_runner_refuses_a_log_of_a_vector_estimator(tmp_path):
  config = _runner_config(tmp_path, estimator="dp_sgd")
  typed = settings.Settings.from_config
  with pytest.raises(trajectory.TrajectoryLogError, match="scalar"):
    trajectory_log.for_run(typed(config), PARAMS, 0)
  config = _runner_config("", estimator="dpzero")
  with pytest.raises(ValueError, match="workdir"):
    trajectory_log.for_run(typed(config), PARAMS, 0)


@pytest.mark.slow  # two processes, ~20 s on 2 cores
def test_replay_command_takes_the_runs_estimator_kwargs_overrides(tmp_path):
  """``python -m experiments.trajectory_log replay`` parses the command
  line as the runner does: an ``--config.estimator_kwargs.<k>`` override
  that the config file does not name replays to the run's parameters."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top

  overrides = [
    "--config=configs/default.py",
    "--config.num_steps=3",
    "--config.insecure_test_noise=True",
    "--config.estimator_kwargs.direction_prng=counter",
  ]
  root = pathlib.Path(__file__).resolve().parents[1]
  run = [sys.executable, "-m", "experiments.run", *overrides]
  work = [f"--config.workdir={tmp_path}", "--config.trajectory_log=True"]
  subprocess.run([*run, *work], cwd=root, check=True, capture_output=True)
  replay = [sys.executable, "-m", "experiments.trajectory_log", "replay"]
  log = f"--log={tmp_path / 'trajectory.bin'}"
  out = subprocess.run(
    [*replay, log, *overrides], cwd=root, check=True, capture_output=True
  )
  result = json.loads((tmp_path / "result.json").read_text())
  assert json.loads(out.stdout)["params_sha256"] == result["params_sha256"]
