"""A result within noise of chance says so: on the report's first line and
in result.json, by a one-sided exact binomial test at level 0.01."""

import math
import types

import numpy as np
import pytest

from experiments.run import chance, report
from experiments.tasks import llm_choice
from zoprivacy.data import prompts
from zoprivacy.data.loaders import superglue


def _classifier(labels, num_classes=10):
  return types.SimpleNamespace(
    test_labels=np.asarray(labels),
    num_classes=num_classes,
    evaluate=None,
    chance_accuracy=None,
  )


def _tail(n, p, k):
  """P[Binomial(n, p) >= k], summed by hand."""
  return sum(
    math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1)
  )


# A test set like digits' of old: 359 examples, the majority class 37.
DIGITS = np.array(
  [3] * 37 + [(0, 1, 2, 4, 5, 6, 7, 8, 9)[i % 9] for i in range(322)]
)


@pytest.mark.parametrize(
  "accuracy,at_chance",
  [
    (39 / 359, True),  # the Noisy-ZOGD run: 0.1086
    (0.0, True),  # below chance is not above it
    (37 / 359, True),  # exactly a constant prediction's score
    (61 / 359, False),  # 0.1699: p = 7e-5
    (0.86, False),
  ],
)
def test_a_classifier_is_tested_against_its_majority_class(accuracy, at_chance):
  task = _classifier(DIGITS)
  out = chance.assess(task, {"test_accuracy": accuracy, "other": 1.0})
  c = out["chance"]
  assert out["at_chance"] is at_chance
  assert c["chance_rate"] == pytest.approx(37 / 359)
  assert c["correct"] == round(accuracy * 359) and c["test_size"] == 359
  assert c["p_value"] == pytest.approx(_tail(359, 37 / 359, c["correct"]))
  assert (c["p_value"] > 0.01) is at_chance and c["level"] == 0.01
  assert "label 3: 37 of 359" in c["baseline"] and "0.1000" in c["baseline"]


def test_a_private_validation_accuracy_is_tested_the_same_way():
  out = chance.assess(_classifier(DIGITS), {"private_validation_accuracy": 0.1})
  assert out["at_chance"] is True and out["chance"]["test_size"] == 359


def test_the_level_is_where_the_test_turns():
  """On 1000 balanced binary labels, 538 right is significant at 0.01
  (p = 0.0088) and 537 is not (p = 0.0105)."""
  task = _classifier([0, 1] * 500, num_classes=2)
  assert chance.assess(task, {"test_accuracy": 0.538})["at_chance"] is False
  assert chance.assess(task, {"test_accuracy": 0.537})["at_chance"] is True


def test_f1_is_not_tested_and_says_why():
  task = types.SimpleNamespace(
    evaluate=lambda t, f: {}, chance_accuracy=None, test_labels=np.zeros(5)
  )
  out = chance.assess(task, {"test_f1": 0.02, "test_exact_match": 0.0})
  assert out["at_chance"] is None and not out["chance"]["tested"]
  assert "not a count of correct answers" in out["chance"]["reason"]
  assert chance.headline(out, "test F1") is None


def test_a_choice_task_takes_the_stronger_of_a_guess_and_the_first_candidate():
  copa = superglue.normalize(
    "copa",
    [
      {
        "premise": "P.",
        "choice1": "A.",
        "choice2": "B.",
        "question": "cause",
        "idx": i,
        "label": int(i % 4 == 3),  # the first choice is right 3 times in 4
      }
      for i in range(8)
    ],
  )
  rate, what = llm_choice.chance_accuracy("copa", copa)
  assert rate == 0.75 and what.startswith("always the first candidate")
  assert len(prompts.TEMPLATES["copa"].candidates(copa[0])) == 2


def test_the_report_says_so_on_its_first_line():
  task = _classifier(DIGITS)
  result = {
    "estimator": "noisy_zogd",
    "dataset": "digits_logreg",
    "test_accuracy": 39 / 359,
    "metric_names": ["test_accuracy"],
    "num_steps": 50,
    "train_seconds": 3.0,
    "epsilon": 1.99,
    "delta": 1e-5,
    "private": True,
    "privacy": "gaussian noise, PLD accountant",
    "privacy_plan": {"notes": []},
    "noise_multiplier_source": "calibrated for target epsilon 2",
    **chance.assess(task, {"test_accuracy": 39 / 359}),
  }
  first = report.format_report(result).splitlines()[0]
  assert first.startswith("AT CHANCE: test accuracy 0.1086 is within noise")
  assert "39 of 359 right" in first and "> 0.01" in first
  result.update(chance.assess(task, {"test_accuracy": 0.86}))
  assert report.format_report(result).startswith("estimator: noisy_zogd")
