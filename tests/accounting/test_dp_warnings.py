"""dp_accounting's log warnings are captured and summarized once."""

import logging
import warnings

import pytest

from zoprivacy import accounting
from zoprivacy.accounting import dp_warnings


def _absl_lines(caplog):
  return [r for r in caplog.records if "dp_accounting" in (r.pathname or "")]


def test_rdp_non_convergence_is_one_summary_warning(caplog):
  caplog.set_level(logging.WARNING)
  # q = 0.9, sigma = 1: dp_accounting fails to converge at several small
  # Renyi orders and logs one line per order.
  with pytest.warns(dp_warnings.DpAccountingWarning) as record:
    eps = accounting.rdp_epsilon(
      accounting.poisson_gaussian_event(
        noise_multiplier=1.0, sampling_probability=0.9, num_steps=100
      ),
      delta=1e-5,
    )
  assert len(record) == 1
  message = str(record[0].message)
  assert "failed to converge" in message and "none lowers" in message
  assert not _absl_lines(caplog)  # nothing leaked to the log
  assert eps > 0


def test_nested_calls_summarize_once_and_clean_calls_are_silent():
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # any warning would fail here
    accounting.rdp_epsilon(
      accounting.poisson_gaussian_event(
        noise_multiplier=1.0, sampling_probability=0.01, num_steps=100
      ),
      delta=1e-5,
    )
  with pytest.warns(dp_warnings.DpAccountingWarning) as record:
    with dp_warnings.summarized("outer"):
      for _ in range(3):
        accounting.rdp_epsilon(
          accounting.poisson_gaussian_event(
            noise_multiplier=1.0, sampling_probability=0.9, num_steps=100
          ),
          delta=1e-5,
        )
  assert len(record) == 1 and "during outer" in str(record[0].message)
