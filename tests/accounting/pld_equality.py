"""Bit-for-bit equality of two dp_accounting PLDs (the tests of the numpy
builds of dp_accounting's PLDs)."""

import numpy as np

from zoprivacy.accounting import dp_accounting_adapter as adapter


def _dense(pmf):
  return pmf.to_dense_pmf() if hasattr(pmf, "to_dense_pmf") else pmf


def assert_same_pld(ours, theirs) -> None:
  """The same directions, supports, masses and infinity masses, bit for
  bit (so every epsilon and delta read from them is the same)."""
  a_remove, a_add, a_sym = adapter.direction_pmfs(ours)
  b_remove, b_add, b_sym = adapter.direction_pmfs(theirs)
  assert a_sym == b_sym
  pairs = [(a_remove, b_remove)] + ([] if a_sym else [(a_add, b_add)])
  for a, b in pairs:
    a, b = _dense(a), _dense(b)
    assert a._lower_loss == b._lower_loss
    assert a._infinity_mass == b._infinity_mass
    np.testing.assert_array_equal(a._probs, b._probs)
