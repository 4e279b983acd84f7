"""Composition audit: features in pairs, every release checked as an attacker.

Bugs live where two features meet. Each pair below runs the command's own
code (``experiments.run.train``) in subprocesses, launch after launch in one
workdir, with secret OS-entropy noise (no test seed): a launch may SIGKILL
itself after a given step (a real kill, at a known step), the next resumes.
Every computed step is recorded by ``composition_worker.py``: its release,
the exact integer noise it received and its batch. The audit then checks,
from the workdir alone (its secret, its ledger):

* **no noise twice**: two computations of the same step in different
  launches (a replay) never share their noise nor their batch; the
  processes of one launch agree bit for bit (one release, added once);
* **the noise is the secret's**: each received noise is the one the
  workdir's secret gives for that step and attempt (regenerated here), and
  each release minus it is an integer sum within the batch's sensitivity;
* **the ledger covers every computation**: the ledger counts at least the
  computations, and holds each computed step at least as many times;
* **on the lattice**: every release times its scale is an integer (exact
  discrete noise, no floating-point noise);
* **secrets at rest**: ``private/run_secret`` and the checkpoints are
  readable by the owner only (0600 files, 0700 folders).

A new pair is a :class:`Pair` and a test that calls :func:`run_and_audit`.
Tuning with exact noise is audited in process, and tuning on a mesh in a
worker (``entry="tune"``): each trial's steps are recorded the same way and
checked by :func:`check_trials` (on the lattice, exact integer noise, no
two trials sharing noise or batches).
"""

import collections
import dataclasses
import json
import os
import socket
import stat
import subprocess
import sys

import numpy as np
import pytest

from configs import default
from experiments import tune
from experiments.tuning import budget, search
from zoprivacy.privacy import randomness
from zoprivacy.privacy.ledger import PrivacyLedger
from zoprivacy.secret_noise import ExactNoiseSource

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORKER = os.path.join(HERE, "composition_worker.py")
# The default config, shortened: 24 steps, evaluated and checkpointed every
# 8, secret noise calibrated for epsilon 2.
SHORT = {
  "num_steps": 24,
  "eval_every": 8,
  "checkpoint_every": 8,
  "check_per_example": False,
}


@dataclasses.dataclass(frozen=True)
class Launch:
  """One command in the pair's workdir: its overrides (on the pair's),
  the step after which it SIGKILLs itself, its processes and devices."""

  overrides: dict = dataclasses.field(default_factory=dict)
  kill_at: int | None = None
  processes: int = 1
  devices: int = 1
  control: str | None = None  # the audit's own test: "reuse_randomness"


@dataclasses.dataclass(frozen=True)
class Pair:
  """Two features together: a config, its overrides, the launches."""

  name: str
  launches: tuple[Launch, ...]
  config: str = "default"
  entry: str = "train"  # what the worker runs (composition_worker.ENTRIES)
  overrides: dict = dataclasses.field(default_factory=dict)
  smoothing: float | None = None  # raw-difference estimators: 2 phi scale


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _start(pair, launch, index, workdir, record):
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  env["XLA_FLAGS"] = " ".join(  # the worker sets its own device count
    f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f
  )
  if launch.devices > 1:  # no executables shared with one-device processes
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
  port = _free_port()
  procs = []
  for pid in range(launch.processes):
    spec = {
      "config": pair.config,
      "overrides": {**pair.overrides, **launch.overrides, "workdir": workdir},
      "devices": launch.devices,
      "kill_at": launch.kill_at,
      "record": record,
      "launch": index,
      "control": launch.control,
      "entry": pair.entry,
    }
    if launch.processes > 1:
      spec["distributed"] = {
        "port": port,
        "num_processes": launch.processes,
        "process_id": pid,
      }
    procs.append(
      subprocess.Popen(
        [sys.executable, WORKER, json.dumps(spec)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
      )
    )
  return procs


def run_and_audit(tmp_path, pair: Pair) -> dict:
  """Runs the pair's launches in one workdir, then audits it (see the
  module); returns what was audited."""
  workdir, record = str(tmp_path / pair.name), str(tmp_path / "releases")
  for index, launch in enumerate(pair.launches):
    for proc in _start(pair, launch, index, workdir, record):
      log, _ = proc.communicate(timeout=600)
      killed = launch.kill_at is not None
      expected = -9 if killed else 0
      assert proc.returncode == expected, (pair.name, index, log[-3000:])
  with open(record) as f:
    records = [json.loads(line) for line in f if line.endswith("\n")]
  assert os.path.exists(os.path.join(workdir, "result.json"))
  return audit(workdir, records, smoothing=pair.smoothing)


def _noise_of(plan, secret: bytes, attempt: int, step: int) -> np.ndarray:
  """The exact noise the workdir's secret gives step ``step`` of attempt
  ``attempt`` (an independent derivation of the documented rule)."""
  stream_secret = randomness.derive(
    randomness.attempt_secret(secret, attempt), "exact noise", num_bytes=32
  )
  return ExactNoiseSource(plan, stream_secret, block_size=0).draw_now(step)


def check_release(record, plan, secret, smoothing=None) -> None:
  """One release: on the lattice, its noise the secret's, its sum bounded."""
  scale = plan.expected_batch_size * plan.grid_points / plan.clip
  if smoothing is not None:
    scale *= 2.0 * smoothing
  total = np.asarray(record["released"], np.float64) * scale
  nearest = np.round(total)
  tolerance = 1e-3 + 4e-6 * np.abs(total)  # float32 arithmetic of the step
  assert np.all(np.abs(total - nearest) <= tolerance), (record, total)
  noise = np.asarray(record["noise"], np.int64)
  expected = _noise_of(plan, secret, record["attempt"], record["step"])
  assert np.array_equal(noise, expected), record
  data = nearest - noise  # the integer sum of the quantized examples
  assert np.all(np.abs(data) <= record["batch_size"] * plan.grid_points)


def check_no_shared_randomness(records) -> int:
  """Replays never share noise or batch; the processes of a launch agree.
  Returns the number of computations (one per launch and step)."""
  by_step = collections.defaultdict(dict)
  for r in records:
    key = r["launch"]
    previous = by_step[r["step"]].setdefault(key, r)
    for field in ("released", "noise", "batch"):  # one release, added once
      assert previous[field] == r[field], (field, previous, r)
  for step, computed in by_step.items():
    runs = list(computed.values())
    for i, a in enumerate(runs):
      for b in runs[i + 1 :]:
        assert a["noise"] != b["noise"], ("noise reused", step)
        assert a["batch"] != b["batch"], ("batch reused", step)
  return sum(len(c) for c in by_step.values()), by_step


def check_secrets_at_rest(workdir: str) -> None:
  mode = lambda p: stat.S_IMODE(os.stat(p).st_mode)
  private = os.path.join(workdir, "private")
  assert mode(private) == 0o700
  assert mode(os.path.join(private, "run_secret")) == 0o600
  for root, dirs, files in os.walk(os.path.join(workdir, "checkpoints")):
    assert all(mode(os.path.join(root, d)) == 0o700 for d in dirs)
    assert all(mode(os.path.join(root, f)) == 0o600 for f in files)


def audit(workdir: str, records, *, smoothing=None) -> dict:
  """Every check of the module on ``workdir`` and its recorded releases."""
  ledger = PrivacyLedger.load(os.path.join(workdir, "privacy_ledger.json"))
  (plan,) = ledger.plans
  with open(os.path.join(workdir, "private", "run_secret"), "rb") as f:
    secret = f.read()
  computations, by_step = check_no_shared_randomness(records)
  for r in records:
    check_release(r, plan, secret, smoothing)
  assert ledger.num_steps >= computations
  for step, computed in by_step.items():
    assert ledger.times_recorded(step) >= len(computed), step
  check_secrets_at_rest(workdir)
  replayed = sorted(s for s, c in by_step.items() if len(c) > 1)
  return {"ledger": ledger, "computations": computations, "replayed": replayed}


def _kill_then_resume(*, resume=None, **launch):
  return (
    Launch(kill_at=19, **launch),
    Launch(overrides=resume or {}, **launch),
  )


@pytest.mark.slow  # two launches of the default config (~25 s)
def test_kill_and_resume(tmp_path):
  """Killed after step 19 (checkpoint at 16, ledger at 24): steps 16..18
  run again with fresh noise and batches, charged again."""
  pair = Pair("kill_resume", _kill_then_resume(), overrides=SHORT)
  result = run_and_audit(tmp_path, pair)
  assert result["replayed"] == [16, 17, 18]
  assert result["ledger"].ranges == ((0, 24), (16, 24))


@pytest.mark.slow  # two launches of the default config (~25 s)
def test_forced_resume_with_a_changed_learning_rate(tmp_path):
  """The resumed launch changes the learning rate by one part in a
  million (the sums hardly change): its replays still get fresh noise."""
  resume = {"learning_rate": 0.02 * (1 + 1e-6), "resume": "force"}
  pair = Pair("forced_lr", _kill_then_resume(resume=resume), overrides=SHORT)
  result = run_and_audit(tmp_path, pair)
  assert result["replayed"] == [16, 17, 18]


@pytest.mark.slow  # the audit's control: two launches (~25 s)
def test_the_audit_catches_a_replay_that_reuses_its_randomness(tmp_path):
  """The launches of the first pair with every attempt's secret replaced by
  the run secret (the old behaviour): the audit must fail."""
  pair = Pair("control", _kill_then_resume(), overrides=SHORT)
  pair = dataclasses.replace(
    pair,
    launches=tuple(
      dataclasses.replace(x, control="reuse_randomness") for x in pair.launches
    ),
  )
  with pytest.raises(AssertionError, match="noise reused"):
    run_and_audit(tmp_path, pair)


@pytest.mark.slow  # two launches of two processes each (~60 s)
@pytest.mark.integration
def test_multiprocess_and_resume(tmp_path):
  """Two processes (2 devices each, parameters sharded across them),
  killed together and resumed: both add the same fresh noise."""
  mesh = {"mesh.data": 2, "mesh.fsdp": 2}
  pair = Pair(
    "multiprocess",
    _kill_then_resume(processes=2, devices=2),
    overrides={**SHORT, **mesh},
  )
  result = run_and_audit(tmp_path, pair)
  assert result["replayed"] == [16, 17, 18]


@pytest.mark.slow  # a mesh of 8 simulated devices, two launches (~40 s)
def test_mesh_and_resume(tmp_path):
  pair = Pair(
    "mesh",
    _kill_then_resume(devices=8),
    overrides={**SHORT, "mesh.data": 2, "mesh.fsdp": 4},
  )
  assert run_and_audit(tmp_path, pair)["replayed"] == [16, 17, 18]


@pytest.mark.slow  # the tiny OPT fixture, two launches (~40 s)
def test_bfloat16_weights_and_exact_noise(tmp_path):
  """DP-ZO's layer-wise step on bfloat16 weights with exact noise, killed
  and resumed: every release is on the lattice, replays are fresh."""
  pytest.importorskip("tokenizers")
  pytest.importorskip("safetensors")
  pair = Pair(
    "bf16_exact",
    (Launch(kill_at=6), Launch()),
    config="tiny_opt_sst2",
    overrides={
      "param_dtype": "bfloat16",
      "privacy.noise": "exact",
      "num_steps": 8,
      "checkpoint_every": 4,
      "num_eval": 16,
    },
    smoothing=0.01,
  )
  result = run_and_audit(tmp_path, pair)
  assert result["replayed"] == [4, 5]


def check_trials(records, plan: dict, trials: int, steps: int) -> None:
  """A tuning's recorded steps: ``trials`` trials of ``steps`` steps, each
  release on the lattice with exact integer noise bounding its sum, no two
  trials sharing their noise or their batches."""
  assert len(records) == trials * steps  # every step of every trial, once
  scale = plan["expected_batch_size"] * plan["grid_points"] / plan["clip"]
  runs = [records[i : i + steps] for i in range(0, trials * steps, steps)]
  for run in runs:
    assert [r["step"] for r in run] == list(range(steps))
    for r in run:
      total = np.asarray(r["released"], np.float64) * scale
      nearest = np.round(total)
      assert np.all(np.abs(total - nearest) <= 1e-3 + 4e-6 * np.abs(total))
      assert r["noise"] is not None
      data = nearest - np.asarray(r["noise"], np.int64)
      assert np.all(np.abs(data) <= r["batch_size"] * plan["grid_points"])
  noises = {tuple(str(r["noise"]) for r in run) for run in runs}
  batches = {tuple(r["batch"] for r in run) for run in runs}
  assert len(noises) == trials, "two trials share their noise"
  assert len(batches) == trials, "two trials share their batches"


@pytest.mark.slow  # three 30-step trials of a small MLP in process (~40 s)
def test_tuning_with_exact_noise(tmp_path, monkeypatch):
  """Tuning x exact noise, audited in process: the tuner's trials (three,
  the secret count fixed here) each release on the lattice with exact
  integer noise, and no two trials share their noise or their batches."""
  import release_recorder  # pylint: disable=g-import-not-at-top

  records = []
  release_recorder.install(monkeypatch, records.append)
  monkeypatch.setattr(budget, "draw_trial_count", lambda s, c: 3)
  config = default.get_config()
  config.update(
    model="mlp",
    num_steps=30,
    eval_every=0,
    checkpoint_every=0,
    workdir=str(tmp_path / "tuning"),
  )
  config.model_kwargs = {"hidden": (16,)}
  space = search.from_flags({"learning_rate": "0.01,0.02,0.05"})
  result = tune.tune(config, space, budget.trial_count("poisson", 3.0))
  assert result["per_trial_plan"]["mechanism"] == "discrete_gaussian"
  check_trials(records, result["per_trial_plan"], trials=3, steps=30)


@pytest.mark.slow  # two 12-step trials on 8 simulated devices (~40 s)
def test_tuning_on_a_mesh(tmp_path):
  """Tuning x a mesh (data 2 x fsdp 4 of 8 simulated devices): the trials'
  releases are checked as on one device."""
  overrides = {
    "num_steps": 12,
    "eval_every": 0,
    "checkpoint_every": 0,
    "check_per_example": False,
    "mesh.data": 2,
    "mesh.fsdp": 4,
  }
  pair = Pair("mesh_tuning", (Launch(devices=8),), entry="tune")
  pair = dataclasses.replace(pair, overrides=overrides)
  workdir, record = str(tmp_path / pair.name), str(tmp_path / "releases")
  (proc,) = _start(pair, pair.launches[0], 0, workdir, record)
  log, _ = proc.communicate(timeout=600)
  assert proc.returncode == 0, log[-3000:]
  with open(record) as f:
    records = [json.loads(line) for line in f if line.endswith("\n")]
  with open(os.path.join(workdir, "result.json")) as f:
    plan = json.load(f)["per_trial_plan"]
  assert plan["mechanism"] == "discrete_gaussian"
  check_trials(records, plan, trials=2, steps=12)
