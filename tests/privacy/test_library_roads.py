"""The library road as a user's script walks it (``user_roads.py``, a
subprocess): batches the plan does not account are refused before the
first release, in one paragraph; the value's own sampler, or arrays whose
sampling the value assumes (and says so), run."""

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
