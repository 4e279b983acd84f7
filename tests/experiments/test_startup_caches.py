"""The runner's caches in the user's cache folder: owner-only, and no
compiled program stored there holds the private data or the run's secret."""

import json
import os
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from experiments.run import caches

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
# A row of pixel values no digit image has (they are multiples of 1/16).
CANARY = [0.7734375, 0.1015625, 0.3359375, 0.9453125, 0.0234375, 0.6640625]

TRAIN = textwrap.dedent(
  """
  import json, sys
  import jax, jax.numpy as jnp, numpy as np
  from configs import default
  from experiments.run import caches, train
  from zoprivacy.data.loaders import digits

  canary = np.asarray(sys.argv[1].split(","), np.float32)
  bundled = digits._bundled_digits

  def with_canary():  # every image carries the canary in its first row
    images, targets = bundled()
    images[:, 0, : canary.size] = canary * 16.0  # the loader divides by 16
    return images, targets

  digits._bundled_digits = with_canary
  caches.use_compilation_cache()
  config = default.get_config()
  config.num_steps = 2
  config.eval_every = 0
  config.model_kwargs.features = (4,)  # a small model compiles faster
  config.privacy.target_epsilon = None
  config.privacy.noise_multiplier = 5.0
  found = {}

  def secrets(run):
    inputs = np.asarray(run.train_data[0])
    assert np.all(inputs[:, 0, : canary.size, 0] == canary)
    found["secret"] = run.secret.hex()
    keys = []
    for leaf in jax.tree.leaves(run.initial_state["opt_state"]):
      if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        leaf = jax.random.key_data(leaf)
      if np.issubdtype(np.asarray(leaf).dtype, np.integer) and leaf.size >= 4:
        keys.append(np.asarray(leaf).tobytes().hex())
    found["keys"] = keys

  train.train(config, progress=False, check_run=secrets)
  # The control: a program that does close over the canary.
  control = jnp.asarray(canary)
  jax.jit(lambda x: x * control)(jnp.ones(canary.size))
  print(json.dumps(found))
  """
)


def _stored_programs(folder):
  from jax._src import compilation_cache  # how JAX compresses its entries

  for name in sorted(os.listdir(folder)):
    if name.endswith("-cache"):
      with open(os.path.join(folder, name), "rb") as f:
        yield name, compilation_cache.decompress_executable(f.read())


def _train(folder, canary, tmp_path) -> dict:
  """A run (in a fresh process) on digits carrying ``canary``, its programs
  stored in ``folder``: its secret and its optimizer state's keys."""
  env = dict(
    os.environ,
    JAX_COMPILATION_CACHE_DIR=str(folder),
    PYTHONPATH=ROOT,
    ZOPRIVACY_CALIBRATION_CACHE_DIR=str(tmp_path / "calibration"),
  )
  env.pop("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", None)
  out = subprocess.run(
    [sys.executable, "-c", TRAIN, ",".join(map(str, canary))],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_no_stored_program_depends_on_private_data_or_the_secret(tmp_path):
  """Two runs on digits carrying two canaries, each with its own secret,
  share one fresh cache folder. Every program of the first is stored, and
  the second stores nothing new (no program, nor its name, depends on the
  data or the secret: they are arguments, never constants); no stored
  program holds a canary, a secret or a key of the optimizer state. A
  program that closes over its canary is stored anew and found (the check
  can fail). Slow: it compiles a run's programs afresh (about 9 s)."""
  folder = tmp_path / "jax"
  first = _train(folder, CANARY, tmp_path)
  names = set(os.listdir(folder))
  assert any(name.startswith("jit_step") for name in names), sorted(names)
  second = _train(folder, CANARY[::-1], tmp_path)
  new = set(os.listdir(folder)) - names
  assert {name.split("-")[0] for name in new} <= {"jit__lambda"}, new
  assert len([n for n in new if n.endswith("-cache")]) == 1, new
  patterns = {}
  for k, (run, canary) in enumerate([(first, CANARY), (second, CANARY[::-1])]):
    patterns[f"canary {k}"] = np.asarray(canary, np.float32).tobytes()
    patterns[f"secret {k}"] = bytes.fromhex(run["secret"])
    assert run["keys"], "the optimizer state holds the noise keys"
    for i, key in enumerate(run["keys"]):
      patterns[f"state key {k}.{i}"] = bytes.fromhex(key)[:16]
  hits = {
    (name.split("-")[0], what)
    for name, blob in _stored_programs(folder)
    for what, pattern in patterns.items()
    if pattern in blob
  }
  assert hits == {("jit__lambda", "canary 0"), ("jit__lambda", "canary 1")}


def test_cache_folders_are_the_owners_only(tmp_path, capsys):
  folder = tmp_path / "cache" / "jax"
  assert caches.owner_only_folder(str(folder))
  assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
  os.chmod(folder, 0o755)  # loosened: narrowed again
  assert caches.owner_only_folder(str(folder))
  assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
  link = tmp_path / "link"
  link.symlink_to(folder)  # a link may point anywhere: refused
  assert not caches.owner_only_folder(str(link))
  afile = tmp_path / "file"
  afile.write_text("")
  assert not caches.owner_only_folder(str(afile))
  assert "not caching in" in capsys.readouterr().err


def test_the_cache_folder_follows_the_environment(tmp_path, monkeypatch):
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  monkeypatch.delenv(caches.NO_CACHE, raising=False)
  assert caches.root() == str(tmp_path / "zoprivacy")
  monkeypatch.delenv(caches.CALIBRATION_VAR, raising=False)
  caches.use_calibration_cache()
  assert os.environ[caches.CALIBRATION_VAR] == str(
    tmp_path / "zoprivacy" / "calibrations"
  )
  monkeypatch.setenv(caches.CALIBRATION_VAR, str(tmp_path / "mine"))
  caches.use_calibration_cache()  # the user's folder wins
  assert os.environ[caches.CALIBRATION_VAR] == str(tmp_path / "mine")
  monkeypatch.setenv(caches.NO_CACHE, "1")
  assert caches.root() is None


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "pipe"])
def test_the_bar_names_each_preparation_before_the_steps(tty, monkeypatch):
  """On a terminal the bar opens at once and names what is being
  prepared; elsewhere nothing is shown before the steps."""
  from experiments.run import progress

  lines = []
  monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
  monkeypatch.setattr(sys.stderr, "write", lambda s: lines.append(s))
  progress.start("dpzero", 10)
  progress.stage("calibrating the noise for epsilon 2")
  progress.stage("compiling the step")
  bar = progress.training_bar(1, 10, "dpzero", True)
  bar.update(9)
  bar.close()
  text = "".join(lines)
  order = [
    text.find("dpzero: preparing"),
    text.find("calibrating the noise"),
    text.find("compiling the step"),
    text.find("10/10"),
  ]
  if tty:
    assert -1 not in order and order == sorted(order), text
  else:
    assert order[:3] == [-1, -1, -1] and order[3] >= 0, text


def _on_a_terminal(args, env) -> str:
  """The output of the command line run on a pseudo-terminal (80 columns)."""
  import fcntl
  import pty
  import struct
  import termios

  leader, follower = pty.openpty()
  fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 80, 0, 0))
  proc = subprocess.Popen(
    args, cwd=ROOT, env=env, stdin=follower, stdout=follower, stderr=follower
  )
  os.close(follower)
  chunks = []
  while True:
    try:
      data = os.read(leader, 65536)
    except OSError:  # the command exited and closed its end
      break
    if not data:
      break
    chunks.append(data)
  proc.wait(timeout=600)
  os.close(leader)
  assert proc.returncode == 0, b"".join(chunks)[-3000:]
  return b"".join(chunks).decode(errors="replace")


@pytest.mark.slow
def test_the_command_names_each_preparation_on_a_terminal(tmp_path):
  """On a terminal the command's bar names what it prepares (the config,
  JAX, the data, the calibration, the compilation) before the steps it
  then counts. Slow: a whole (two-step) run."""
  env = dict(os.environ, PYTHONPATH=ROOT)
  text = _on_a_terminal(
    [
      sys.executable,
      "-m",
      "experiments.run",
      "--config",
      "configs/default.py",
      "--config.num_steps=2",
    ],
    env,
  )
  stages = [
    "dpzero: checking the config",
    "dpzero: loading JAX",
    "dpzero: loading the data",
    "dpzero: calibrating the noise for epsilon 2",
    "dpzero: compiling the step",
    "2/2",
  ]
  where = [text.find(stage) for stage in stages]
  assert -1 not in where and where == sorted(where), (where, text[-2000:])
