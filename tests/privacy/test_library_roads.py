"""The library road as a user's script walks it (``user_roads.py``, a
subprocess, about 15 s of CPU for 21 roads): what the plan does not account
is refused before the first release, in one paragraph (batches drawn
otherwise, a loss that mixes examples, a wrapper that drops releases, a
second private estimator, lookahead); the value's own sampler, arrays
whose sampling the value assumes (and says so) and mechanize run."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent


@pytest.fixture(scope="module")
def roads():
  env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
  out = subprocess.run(
    [sys.executable, str(HERE / "user_roads.py")],
    capture_output=True,
    text=True,
    env=env,
    timeout=600,
    check=True,
  )
  return json.loads(out.stdout.strip().splitlines()[-1])


def _refused(text: str, needle: str) -> None:
  assert text.startswith("refused: "), text
  assert needle in text and "\n" not in text, text


def test_the_values_sampler_runs_and_its_plan_is_checked(roads):
  text = roads["the value's sampler"]
  assert text.startswith("ran: epsilon ") and "ASSUMED" not in text


def test_a_sampler_at_another_rate_is_refused(roads):
  """The issue's reproduction: a plan at B = 64 and a sampler at B = 512
  (batches of about 556 rows) reported epsilon 1.9963 without a word."""
  _refused(roads["a sampler at another rate"], "expected size 512 of 2000")


def test_fixed_size_batches_are_refused_or_accounted(roads):
  _refused(roads["shuffled fixed-size batches"], "shuffled fixed size 64")
  _refused(
    roads["fixed-size batches for a Poisson plan"],
    "fixed size 64 of 2000, without replacement",
  )
  _refused(
    roads["fixed-size sampling in the value"],
    "accounted under 'poisson' sampling",
  )


def test_arrays_run_only_when_the_value_assumes_their_sampling(roads):
  _refused(roads["arrays from elsewhere"], "assume_sampling=True")
  text = roads["arrays, sampling assumed"]
  assert text.startswith("ran: ") and "sampling ASSUMED, not checked" in text


def test_a_batch_mean_loss_is_refused_by_make_step(roads):
  """It passed through ``make_step`` and reported epsilon 1.29: only the
  runner checked the per-example contract."""
  _refused(roads["a batch-mean loss"], "mixes examples")


def test_the_docs_update_loop_runs_from_zoprivacy_init(roads):
  """Two steps: mechanize post-processes the releases, the same epsilon."""
  assert roads["the docs' tx.update loop"].startswith("ran: epsilon ")
  assert roads["the docs' tx.update loop"] == roads["mechanize, zoprivacy.init"]


@pytest.mark.parametrize("around", ["MultiSteps", "two estimators"])
def test_wrappers_and_two_estimators_are_refused_before_any_release(
  roads, around
):
  """On every road: ``make_step`` when it traces its step, ``zoprivacy.init``
  when it makes the state, and an estimator asked to release from a state
  ``tx.init`` made alone (the user's own loop) at its first update."""
  why = {
    "MultiSteps": "optax.MultiSteps wraps a zoprivacy estimator",
    "two estimators": "holds 2 private estimators",
  }[around]
  _refused(roads[f"{around}, make_step"], why)
  _refused(roads[f"{around}, zoprivacy.init"], why)
  _refused(roads[f"{around}, tx.init"], "state = zoprivacy.init(tx, params)")
  _refused(roads["tx.init alone, tx.update"], "zoprivacy.init(tx, params)")


def test_mechanize_runs_and_lookahead_is_refused_as_the_docs_say(roads):
  """mechanize keeps the initial parameters in its state: ``make_step``
  donated that buffer twice; lookahead cannot take the loss."""
  assert roads["mechanize, make_step"].startswith("ran: epsilon ")
  _refused(roads["lookahead around, make_step"], "optax.lookahead is in")
  _refused(roads["lookahead after, zoprivacy.init"], "optax.lookahead is in")
