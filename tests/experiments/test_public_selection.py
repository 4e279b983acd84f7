"""Hyperparameter selection on a public proxy reads no private example."""

import jax.numpy as jnp
import numpy as np
import pytest

from configs import default
from experiments import public_selection, tasks
from experiments.run import report, train
from experiments.tasks import public_proxy

D = 6
N_PRIVATE, N_PUBLIC = 120, 400


def _synthetic_task(config):
  """Separable data; the PRIVATE labels are inverted, so a run that trained
  on them would score near 0 on the public evaluation set."""
  del config
  rng = np.random.default_rng(0)
  w = rng.normal(size=D)
  x_private = rng.normal(size=(N_PRIVATE, D)).astype(np.float32)
  x_public = rng.normal(size=(N_PUBLIC, D)).astype(np.float32)
  x_test = rng.normal(size=(50, D)).astype(np.float32)
  label = lambda x: (x @ w > 0).astype(np.int32)
  _synthetic_task.builds += 1
  return tasks.Task(
    x_private,
    1 - label(x_private),  # adversarial: inverted
    x_test,
    np.ones(50, np.int32),  # a private test set of one class
    2,
    lambda key: ({"w": jnp.zeros((D, 2)), "b": jnp.zeros(2)}, {}),
    lambda t, f, x: x @ t["w"] + t["b"],
    public_inputs=x_public,
    public_labels=label(x_public),
  )


@pytest.fixture
def synthetic(monkeypatch):
  _synthetic_task.builds = 0
  monkeypatch.setitem(tasks.TASKS, "synthetic_public", _synthetic_task)
  c = default.get_config()
  c.dataset = "synthetic_public"
  c.model_kwargs = {}
  c.estimator_kwargs.direction_prng = "rbg"
  c.privacy.clip = 5.0
  c.privacy.target_epsilon = None
  c.privacy.noise_multiplier = 1.0
  c.privacy.expected_batch_size = 40
  c.num_steps = 60
  c.eval_every = 0
  c.checkpoint_every = 0
  c.validation_size = 100
  c.check_per_example = False
  return c


def test_proxy_task_uses_only_public_rows(synthetic):
  private = _synthetic_task(synthetic)
  proxy = public_proxy.public_proxy_task(private, eval_size=100, seed=3)
  rows = lambda x: {tuple(r) for r in np.asarray(x)}
  public_rows = rows(private.public_inputs)
  train_rows, test, rest = (
    rows(proxy.train_inputs),
    rows(proxy.test_inputs),
    rows(proxy.public_inputs),
  )
  assert proxy.num_train == N_PRIVATE  # same plan: same sampling rate
  assert len(proxy.test_labels) == 100
  assert len(proxy.public_labels) == N_PUBLIC - N_PRIVATE - 100
  assert train_rows | test | rest == public_rows
  assert not (train_rows & test or train_rows & rest or test & rest)
  again = public_proxy.public_proxy_task(private, eval_size=100, seed=3)
  np.testing.assert_array_equal(again.train_inputs, proxy.train_inputs)


def test_balanced_proxy_with_examples_per_class(synthetic):
  task = _synthetic_task(synthetic)
  proxy = public_proxy.public_proxy_task(
    task, eval_size=100, seed=0, per_class=60
  )
  np.testing.assert_array_equal(np.bincount(proxy.train_labels), [60, 60])
  np.testing.assert_array_equal(np.bincount(proxy.test_labels), [50, 50])
  assert len(proxy.public_labels) == N_PUBLIC - 220
  with pytest.raises(ValueError, match="examples_per_class=50"):
    public_proxy.public_proxy_task(task, eval_size=100, seed=0, per_class=50)
  # 206 public examples of class 0 and 194 of class 1: 60 + 135 of each fit
  # 120 + 270 <= 400 in all, not in class 1.
  with pytest.raises(
    ValueError, match="of class 1, but the public set has 194"
  ):
    public_proxy.public_proxy_task(task, eval_size=270, seed=0, per_class=60)


def test_proxy_refuses_missing_or_small_public_data(synthetic):
  task = _synthetic_task(synthetic)
  no_public = tasks.Task(*[getattr(task, f) for f in ("train_inputs",
    "train_labels", "test_inputs", "test_labels", "num_classes", "init",
    "apply")])  # fmt: skip
  with pytest.raises(ValueError, match="needs public data"):
    public_proxy.public_proxy_task(no_public, eval_size=10, seed=0)
  with pytest.raises(ValueError, match="the public set has 400"):
    public_proxy.public_proxy_task(task, eval_size=300, seed=0)


def test_selection_trains_on_public_data_and_picks_the_learning_step(
  synthetic,
):
  selections = public_selection.select(
    synthetic,
    {"learning_rate": [0.0, 1.0]},
    {"privacy.noise_multiplier": [0.5, 1.0]},
  )
  assert _synthetic_task.builds == 1  # swept fields do not reach the task
  expected_eval = public_proxy.public_proxy_task(
    _synthetic_task(synthetic), eval_size=100, seed=0
  ).test_labels
  assert [s["per"] for s in selections] == [
    {"privacy.noise_multiplier": 0.5},
    {"privacy.noise_multiplier": 1.0},
  ]
  for s in selections:
    still, learned = s["rows"]
    # Zero weights predict class 0: the exact share of class 0 in the
    # public evaluation set, so that is where the score comes from.
    assert still["score"] == pytest.approx(np.mean(expected_eval == 0))
    # Trained on the inverted private labels it would score near 0.
    assert learned["score"] > 0.8, s
    assert s["selected"] == {"learning_rate": 1.0}
    assert all(np.isfinite(r["epsilon"]) for r in s["rows"])
  text = public_selection.format_selection(selections[0], "configs/x.py")
  assert "learning_rate=1.0: public val. accuracy" in text
  assert text.splitlines()[2].endswith("<- selected")
  assert text.splitlines()[-1].strip() == (
    "private run: python -m experiments.run --config configs/x.py "
    "--config.privacy.noise_multiplier=0.5 --config.learning_rate=1.0"
  )


def test_sweeping_a_task_field_rebuilds_the_task(synthetic):
  synthetic.num_steps = 2
  public_selection.select(synthetic, {"data_dir": ["a", "b"]})
  assert _synthetic_task.builds == 2


def test_axis_parsing_and_unknown_fields(synthetic):
  assert public_selection.parse_axis("learning_rate=1e-3,3") == (
    "learning_rate",
    [1e-3, 3],
  )
  assert public_selection.parse_axis("public=amazon+tweets")[1] == [
    "amazon+tweets"
  ]
  with pytest.raises(ValueError, match="expected <field>="):
    public_selection.parse_axis("learning_rate")
  with pytest.raises(ValueError, match="Unknown config field 'lr'"):
    public_selection.with_fields(synthetic, {"lr": 1.0})
  with pytest.raises(ValueError, match="now privacy.target_epsilon"):
    public_selection.with_fields(synthetic, {"target_epsilon": 2})
  c = public_selection.with_fields(
    synthetic, {"privacy.target_epsilon": 2, "privacy.clip": 1.0}
  )
  assert c.privacy.target_epsilon == 2.0 and c.privacy.clip == 1.0
  assert synthetic.privacy.clip == 5.0  # the original is unchanged


def test_a_proxy_run_says_so_in_its_report(synthetic):
  synthetic.num_steps = 2
  synthetic.public_proxy = True
  result = train.train(synthetic, progress=False)
  assert result["public_proxy"] is True
  text = report.format_report(result)
  assert "public validation accuracy (public proxy, no private data)" in text
  assert "test accuracy" not in text
