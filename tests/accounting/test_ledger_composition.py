"""A ledger of widely mixed multipliers is accounted within a memory bound.

A forced resume from multiplier 17.44 to 0.1744 left a ledger whose PLD
composition asked for over 10 GB (``MemoryError``: dp_accounting builds a
one-step PMF point by point in a dictionary, about 170 bytes a point), and
each later start of the run asked again. The ledger now bounds the memory
of the whole composition (2 GiB of its model) and composes another way
where it would pass, naming the route.
"""

import math
import tracemalloc

import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from zoprivacy.accounting import epsilon as eps_lib
from zoprivacy.accounting import pld_size
from zoprivacy.privacy import PrivacyPlan, ledger_composition
from zoprivacy.privacy.ledger import PrivacyLedger

DELTA = 1e-5
N, B = 1437, 64  # digits' training set, the default batch
# dp_accounting's own PLDAccountant on the two events at 1e-4 (2000 steps
# each), computed once with about 2 GB: the figure the ledger can no
# longer afford.
FINE_EPSILON = 1724.2684993322482


def _plan(sigma, mechanism="gaussian", **kw):
  size = kw.pop("expected_batch_size", B)
  return PrivacyPlan.build(
    mechanism=mechanism,
    noise_multiplier=sigma,
    clip=1.0,
    expected_batch_size=size,
    dataset_size=N,
    **kw,
  )


def _peak_bytes(fn):
  tracemalloc.start()
  try:
    out = fn()
    return out, tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()


def test_full_batch_multipliers_compose_as_one_gaussian():
  """The walk's ledger (full batch, 50 steps at 17.44 then 50 at 0.1744):
  the PLD composition raised MemoryError; the ledger composes it exactly,
  as one Gaussian of ``mu = sqrt(sum T_i / sigma_i^2)``, in kilobytes."""
  high, low = (
    _plan(s, sampling="full_batch", expected_batch_size=N)
    for s in (17.44, 0.1744)
  )
  ledger = PrivacyLedger(delta=DELTA)
  ledger.record(high, 50)
  ledger.record(low, 50)
  with pytest.warns(ledger_composition.LedgerCompositionWarning):
    composed, peak = _peak_bytes(ledger.composition)
    assert ledger.summary()["composition"] == composed.method
    assert ledger.summary()["composition_why"] == composed.why
    assert "composed by exact Gaussian composition" in ledger.report()
  mu = math.sqrt(50 / 17.44**2 + 50 / 0.1744**2)
  assert composed.epsilon == eps_lib.gaussian_profile_epsilon(mu, DELTA)
  assert composed.method == "exact Gaussian composition"
  assert "over the bound of 2 GiB" in composed.why
  assert peak < 2**20
  # one segment alone: the plan's own exact accountant, the same law
  assert ledger.epsilon(50) == high.epsilon(50, DELTA)


def test_sampled_multipliers_fall_back_to_a_coarser_pld_within_the_bound(
  monkeypatch,
):
  """Poisson-sampled, 2000 steps at 17.44 then 2000 at 0.1744: the PLD at
  1e-4 is over the bound (about 2.9 GiB of the model), at 1e-3 within it.
  With the bound at 64 MiB (so that the test composes at 1e-2, in
  seconds), the ledger composes the pessimistic PLD at 1e-2, an upper
  bound of the 1e-4 figure within ``T`` times the discretization, within
  that bound (traced), and names it."""
  segments = [(_plan(17.44), 2000), (_plan(0.1744), 2000)]
  shapes = [ledger_composition._shape(p) for p, _ in segments]  # pylint: disable=protected-access
  fine = ledger_composition.composition_bytes(segments, shapes, 1e-4)
  coarse = ledger_composition.composition_bytes(segments, shapes, 1e-3)
  assert coarse <= pld_size.MAX_COMPOSITION_BYTES < fine
  monkeypatch.setattr(pld_size, "MAX_COMPOSITION_BYTES", 64 * 2**20)
  ledger = PrivacyLedger(delta=DELTA)
  for plan, n in segments:
    ledger.record(plan, n)
  with pytest.warns(ledger_composition.LedgerCompositionWarning):
    composed, peak = _peak_bytes(ledger.composition)
  assert composed.method == "PLD at discretization 0.01 (looser)"
  assert FINE_EPSILON <= composed.epsilon <= FINE_EPSILON + 4000 * 1e-2
  assert peak <= pld_size.MAX_COMPOSITION_BYTES, peak


def test_ordinary_mixed_ledger_keeps_the_pld_figure():
  """Nearby multipliers (a resume at 2.2 after 2.0): the PLD at 1e-4, as
  before, no route named."""
  plans = [_plan(2.0), _plan(2.2)]
  ledger = PrivacyLedger(delta=DELTA)
  for plan in plans:
    ledger.record(plan, 300)
  composed = ledger.composition()
  assert composed.method == ledger_composition.PLD and not composed.why
  direct = plans[0].pld(300).compose(plans[1].pld(300))
  assert composed.epsilon == direct.get_epsilon_for_delta(DELTA)
  assert "composition" not in ledger.summary()


@pytest.mark.parametrize("ratio", [0.0573, 1.0, 5.73])
@pytest.mark.parametrize("p", [0.0445, 1.0])
def test_estimated_points_bound_dp_accountings_allocation(ratio, p):
  """The generous estimate is at least what dp_accounting allocates
  (its truncation bounds on the actual PMF), at 1 to 10^5 steps; checked at
  discretization 0.01 (the supports scale with 1 / discretization)."""
  interval = 1e-2
  if p < 1.0:
    one = pld_lib.from_gaussian_mechanism(
      1.0 / ratio, value_discretization_interval=interval, sampling_prob=p
    )
  else:  # an unsampled Laplace (a Gaussian is one PLD in closed form)
    one = pld_lib.from_laplace_mechanism(
      1.0 / ratio, value_discretization_interval=interval
    )
  for steps in (1, 10, 2000, 100_000):
    _, estimate = pld_size.estimated_points(ratio, steps, p, interval)
    assert pld_size.self_composed_points(one, steps) <= estimate


@pytest.mark.parametrize("mu", [0.5, 5.0, 18.0])
def test_gaussian_points_bound_one_gaussian_pld(mu):
  interval = 1e-2
  pld = pld_lib.from_gaussian_mechanism(
    1.0 / mu, value_discretization_interval=interval
  )
  sizes = [pmf.size for pmf in (pld._pmf_remove, pld._pmf_add)]  # pylint: disable=protected-access
  assert max(sizes) <= pld_size.gaussian_points(mu, interval)


def test_refused_when_nothing_fits(monkeypatch):
  """A bound nothing fits in, and a segment without a Renyi DP bound (a
  Laplace): one paragraph, no allocation."""
  monkeypatch.setattr(pld_size, "MAX_COMPOSITION_BYTES", 1.0)
  ledger = PrivacyLedger(delta=DELTA)
  ledger.record(_plan(2.0, mechanism="laplace"), 10)
  ledger.record(_plan(3.0), 10)
  with pytest.raises(pld_size.PLDTooLargeError, match="cannot be composed"):
    ledger.epsilon()
