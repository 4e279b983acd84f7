"""Property: invalid privacy plans are rejected with a clear PlanError."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zoprivacy.privacy import PlanError, PrivacyPlan

_SETTINGS = settings(
  max_examples=50, derandomize=True, database=None, deadline=None
)


@_SETTINGS
@given(
  sigma=st.one_of(st.floats(max_value=0.0, allow_nan=False), st.just(math.nan)),
  mechanism=st.sampled_from(["gaussian", "laplace"]),
)
def test_a_nonpositive_noise_multiplier_is_rejected(sigma, mechanism):
  with pytest.raises(PlanError, match="noise_multiplier must be > 0"):
    PrivacyPlan.build(mechanism=mechanism, noise_multiplier=sigma, clip=1.0)


@_SETTINGS
@given(
  field=st.sampled_from(
    ["mechanism", "neighboring", "sampling", "noise_source", "accountant"]
  ),
  value=st.text(min_size=1, max_size=8).filter(
    lambda s: (
      s
      not in (
        "gaussian laplace none poisson pld rdp add_or_remove replace_one"
      ).split()
    )
  ),
)
def test_an_unknown_choice_is_rejected_and_named(field, value):
  kwargs = {"mechanism": "gaussian", "noise_multiplier": 1.0, field: value}
  with pytest.raises(PlanError, match=field):
    PrivacyPlan.build(**kwargs)


@_SETTINGS
@given(sigma=st.floats(min_value=1e-3, max_value=1e3))
def test_laplace_under_replace_one_is_rejected(sigma):
  with pytest.raises(PlanError, match="add/remove only"):
    PrivacyPlan.build(
      mechanism="laplace", noise_multiplier=sigma, neighboring="replace_one"
    )
