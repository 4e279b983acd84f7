"""A report whose epsilon exceeds 10, or comes from a loose bound, says so
on its first line; an ordinary one starts with the estimator."""

import pytest

from configs import hidden_state_digits_logreg
from experiments.run import report, train


def _result(**fields):
  result = {
    "estimator": "dpzero",
    "dataset": "digits",
    "test_accuracy": 0.86,
    "metric_names": ["test_accuracy"],
    "num_steps": 4000,
    "train_seconds": 30.0,
    "epsilon": 1.9978,
    "delta": 1e-5,
    "private": True,
    "privacy": "discrete gaussian noise, PLD accountant",
    "privacy_plan": {"notes": []},
    "noise_multiplier_source": "calibrated for target epsilon 2",
  }
  return {**result, **fields}


@pytest.mark.parametrize(
  "fields,first",
  [
    ({}, "estimator: dpzero on digits"),
    ({"delta": None, "epsilon": float("inf")}, "estimator: dpzero on digits"),
    (
      {"epsilon": 13839.2},
      "WARNING: epsilon 13,839 is above 10: a guarantee this weak",
    ),
    (
      {"privacy": "discrete gaussian noise, RDP accountant (integer orders)"},
      "WARNING: the epsilon is a loose bound: an RDP bound",
    ),
    (
      {
        "privacy_plan": {
          "notes": ["mini-batches are charged as full-batch steps"]
        }
      },
      "WARNING: the epsilon is a loose bound: mini-batches are charged",
    ),
    (
      {
        "ledger": {
          "composition": "Renyi DP",
          "composition_why": "the PLD would take 9 GiB",
        }
      },
      "WARNING: the epsilon is a loose bound: the ledger is composed by "
      "Renyi DP",
    ),
  ],
)
def test_the_first_line_names_a_weak_or_loose_epsilon(fields, first):
  assert report.format_report(_result(**fields)).startswith(first)


def test_the_hidden_state_config_says_so_on_its_first_line():
  """``configs/hidden_state_digits_logreg.py`` (here 5 of its 200 steps):
  a composition epsilon in the hundreds. Thm 3.2 gives nothing smaller
  here, so the first line claims no smaller final-iterate figure, and the
  views below are labelled against the headline."""
  c = hidden_state_digits_logreg.get_config()
  c.num_steps = 5
  r = train.train(c, progress=False)
  text = report.format_report(r)
  first = text.splitlines()[0]
  assert first.startswith("WARNING: epsilon ") and "is above 10" in first
  assert "every iterate counted as published" not in first
  assert "hidden state (Thm 3.2)" in text and "which stands" in text
  assert "looser than the headline's PLD" in text


def test_a_final_iterate_figure_below_the_headline_is_named_first():
  views = {
    "hidden_state_epsilon": {"standard": 2.0, "improved": 1.5},
    "composition_epsilon": {"standard": 9.0, "improved": 8.5},
    "output_perturbation_epsilon": {"standard": 50.0, "improved": 49.0},
  }
  first = report.headline_warning(_result(epsilon=8.0, final_iterate=views))
  assert "every iterate counted as published" in first
  assert "whose epsilon is 1.5 (hidden state (Thm 3.2), below)" in first


def test_a_looser_composition_route_is_named_with_its_reason():
  """A ledger composed by a route other than the plan's PLD (its memory
  bound, :mod:`zoprivacy.privacy.ledger_composition`) says which and why
  in the privacy lines, not only in result.json."""
  text = report.format_report(
    _result(
      ledger={
        "composition": "the PLD at discretization 0.001",
        "composition_why": "the PLD at 1e-4 would take 9 GiB",
      }
    )
  )
  assert (
    "the epsilon is composed by the PLD at discretization 0.001, looser "
    "than the PLD at the plan's discretization: the PLD at 1e-4 would take "
    "9 GiB"
  ) in text
