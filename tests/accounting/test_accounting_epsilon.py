"""PLD / RDP / pure-eps accounting against paper values and dp_accounting."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from zoprivacy import accounting as acc
from zoprivacy.accounting import dp_accounting_adapter as adapter
from zoprivacy.privacy import PrivacyPlan, epsilon_report, sampling_scheme

P_TABLE16 = 16 / 1000
T_TABLE16 = 75000
DELTA = 1e-5


def _plan(*, sampling_probability, mechanism="gaussian", **kwargs):
  """The plan of a setting given by its sampling probability (as the CLI)."""
  return PrivacyPlan.build(
    mechanism=mechanism,
    sampling=sampling_scheme.with_probability(sampling_probability),
    **kwargs,
  )


@pytest.mark.parametrize(
  "sigma,expected", [(30.9, 0.5004), (16.4, 0.9988), (4.8, 3.9952)]
)
def test_dpzo_table16_epsilons(sigma, expected):
  """DP-ZO Table 16: sigma 30.9/16.4/4.8 give eps 0.5/1/4."""
  event = acc.poisson_gaussian_event(
    noise_multiplier=sigma,
    sampling_probability=P_TABLE16,
    num_steps=T_TABLE16,
  )
  eps = acc.pld_epsilon(event, delta=DELTA)
  assert isinstance(eps, float)
  assert eps == pytest.approx(expected, abs=5e-4)
  paper = {30.9: 0.5, 16.4: 1.0, 4.8: 4.0}[sigma]
  assert abs(eps - paper) / paper < 0.01


def _full_batch(noise_multiplier, num_steps):
  return acc.poisson_gaussian_event(
    noise_multiplier=noise_multiplier,
    sampling_probability=1.0,
    num_steps=num_steps,
  )


def _literal_queries_event(sigma, q, p, num_steps):
  """``q`` Gaussians of std ``sqrt(q) sigma`` on one batch, written literally."""
  inner = dp_accounting.ComposedDpEvent(
    [dp_accounting.GaussianDpEvent(sigma * math.sqrt(q))] * q
  )
  if p < 1.0:
    inner = dp_accounting.PoissonSampledDpEvent(p, inner)
  return dp_accounting.SelfComposedDpEvent(inner, num_steps)


def _plan_event(sigma, q, p, num_steps):
  """The event of ``num_steps`` steps of the plan with ``q`` queries."""
  plan = _plan(noise_multiplier=sigma, num_queries=q, sampling_probability=p)
  return dp_accounting.SelfComposedDpEvent(plan.step_event(), num_steps)


def _without_replacement(sigma, batch_size, dataset_size, num_steps):
  inner = dp_accounting.SampledWithoutReplacementDpEvent(
    dataset_size, batch_size, dp_accounting.GaussianDpEvent(sigma)
  )
  return dp_accounting.SelfComposedDpEvent(inner, num_steps)


def test_pld_matches_dp_accounting_pld_accountant():
  """Our PLD construction is event-for-event dp_accounting's PLDAccountant."""
  events = [
    acc.poisson_gaussian_event(
      noise_multiplier=4.8,
      sampling_probability=P_TABLE16,
      num_steps=T_TABLE16,
    ),
    acc.poisson_laplace_event(
      noise_multiplier=3.0, sampling_probability=0.05, num_steps=300
    ),
    _full_batch(20.0, 50),
  ]
  for event in events:
    ref = pld_privacy_accountant.PLDAccountant()
    ref.compose(event)
    assert acc.pld_epsilon(event, delta=DELTA) == pytest.approx(
      ref.get_epsilon(DELTA), rel=1e-7
    )
  ev = acc.poisson_gaussian_event(
    noise_multiplier=2.0, sampling_probability=0.01, num_steps=500
  )
  ref = pld_privacy_accountant.PLDAccountant(
    dp_accounting.NeighboringRelation.REPLACE_ONE
  )
  ref.compose(ev)
  assert acc.pld_epsilon(ev, delta=DELTA, neighboring="replace_one") == (
    pytest.approx(ref.get_epsilon(DELTA), rel=1e-7)
  )


def test_reported_epsilon_is_max_of_add_and_remove():
  """conventions §4: sigma=30.9 gives remove 0.50038 and add 0.50016."""
  event = acc.poisson_gaussian_event(
    noise_multiplier=30.9,
    sampling_probability=P_TABLE16,
    num_steps=T_TABLE16,
  )
  split = acc.pld_epsilon_by_direction(event, delta=DELTA)
  assert split.remove == pytest.approx(0.50038, abs=1e-5)
  assert split.add == pytest.approx(0.50016, abs=1e-5)
  assert split.remove != split.add
  assert acc.pld_epsilon(event, delta=DELTA) == max(split.remove, split.add)
  # At large p the two directions are far apart; the max is still reported.
  big_p = acc.poisson_gaussian_event(
    noise_multiplier=1.0, sampling_probability=0.5, num_steps=1
  )
  s2 = acc.pld_epsilon_by_direction(big_p, delta=1e-3)
  assert s2.remove > 2 * s2.add
  assert acc.pld_epsilon(big_p, delta=1e-3) == max(s2.remove, s2.add)
  # Independent route: dp_accounting's per-direction privacy-loss objects.
  from dp_accounting.pld import privacy_loss_mechanism as plm

  for adjacency, expected in [
    (plm.AdjacencyType.REMOVE, split.remove),
    (plm.AdjacencyType.ADD, split.add),
  ]:
    loss = plm.GaussianPrivacyLoss(
      30.9, sampling_prob=P_TABLE16, adjacency_type=adjacency
    )
    one = adapter.monotone_loss_pld(loss, 1e-4).self_compose(T_TABLE16)
    assert one.get_epsilon_for_delta(DELTA) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
  "b,p,T", [(2.0, 0.01, 100), (0.5, 0.2, 7), (10.0, 1.0, 3)]
)
def test_pure_epsilon_poisson_laplace_by_hand(b, p, T):
  """DP-ZO Thm. 3.1: eps = T log(1 + p (e^{1/b} - 1))."""
  # Written out with exp/log (the implementation uses expm1/log1p), and the
  # decimal values worked out by hand for the first two settings.
  by_hand = T * math.log(1.0 + p * (math.exp(1.0 / b) - 1.0))
  literal = {
    (2.0, 0.01, 100): 0.6466261305,  # 100 * log(1.0064872127)
    (0.5, 0.2, 7): 5.7625049339,  # 7 * log(2.2778112198)
    (10.0, 1.0, 3): 0.3,
  }[(b, p, T)]  # p = 1: T / b
  assert by_hand == pytest.approx(literal, abs=1e-9)
  tol = 1e-12
  got = acc.pure_epsilon_poisson_laplace(
    noise_multiplier=b, sampling_probability=p, num_steps=T
  )
  assert got == pytest.approx(by_hand, abs=tol)
  b_back = acc.pure_laplace_noise_multiplier(
    target_epsilon=got, sampling_probability=p, num_steps=T
  )
  assert b_back == pytest.approx(b, rel=1e-10)


def test_subsampled_laplace_pld_is_far_below_pure_eps():
  """p=0.02, T=2000, b with pure eps 4: PLD (eps, 1e-5) is ~0.28 (conventions §8)."""
  b = acc.pure_laplace_noise_multiplier(
    target_epsilon=4.0, sampling_probability=0.02, num_steps=2000
  )
  assert acc.pure_epsilon_poisson_laplace(
    noise_multiplier=b, sampling_probability=0.02, num_steps=2000
  ) == (pytest.approx(4.0, rel=1e-12))
  event = acc.poisson_laplace_event(
    noise_multiplier=b, sampling_probability=0.02, num_steps=2000
  )
  eps = acc.pld_epsilon(event, delta=1e-5)
  assert 0.27 < eps < 0.29
  report = epsilon_report(
    _plan(mechanism="laplace", noise_multiplier=b, sampling_probability=0.02),
    num_steps=2000,
    delta=1e-5,
  )
  assert report.pure_epsilon == pytest.approx(4.0)
  assert report.pld_epsilon == eps
  assert report.rdp_epsilon is None and "Laplace" in report.rdp_note
  with pytest.raises(ValueError, match="Laplace"):
    acc.rdp_epsilon(event, delta=1e-5)
  with pytest.raises(ValueError, match="replace-one"):
    acc.pld_epsilon(event, delta=1e-5, neighboring="replace_one")


def test_q_queries_equivalent_to_one_gaussian_under_rdp():
  """conventions §5: q queries of std sqrt(q) sigma == one Gaussian of std sigma."""
  for sigma, q, p, T in [
    (3.0, 4, 0.02, 500),
    (1.5, 9, 0.1, 50),
    (8.0, 2, 1.0, 100),
  ]:
    composed = _literal_queries_event(sigma, q, p, T)
    single = _plan_event(sigma, q, p, T)
    ref = rdp_privacy_accountant.RdpAccountant()
    ref.compose(composed)
    assert acc.rdp_epsilon(single, delta=DELTA) == pytest.approx(
      ref.get_epsilon(DELTA), rel=1e-10
    )
    # A wrong equivalence (sigma instead of sigma * sqrt(q) per query) differs.
    wrong = rdp_privacy_accountant.RdpAccountant()
    wrong.compose(_literal_queries_event(sigma / math.sqrt(q), q, p, T))
    assert wrong.get_epsilon(DELTA) > 1.2 * ref.get_epsilon(DELTA)
  # The PLD rejects the composed form inside Poisson sampling, clearly.
  with pytest.raises(ValueError, match="num_queries=q"):
    acc.pld_epsilon(_literal_queries_event(3.0, 4, 0.02, 5), delta=DELTA)


def test_q_queries_equivalence_under_pld_without_sampling():
  """Without subsampling the PLD composes the q queries literally: same eps."""
  pld = acc.build_pld(_literal_queries_event(5.0, 4, 1.0, 1))
  single = _plan_event(5.0, 4, 1.0, 1)
  assert pld.get_epsilon_for_delta(DELTA) == pytest.approx(
    acc.pld_epsilon(single, delta=DELTA), abs=2e-3
  )


def test_replace_one_conventions_pld_and_rdp_agree():
  """Replace-one charges sensitivity 2C in both PLD and (corrected) RDP."""
  ev = _full_batch(2.0, 10)
  pld_rep = acc.pld_epsilon(ev, delta=DELTA, neighboring="replace_one")
  # Same as add/remove with half the noise multiplier.
  half = _full_batch(1.0, 10)
  assert pld_rep == pytest.approx(acc.pld_epsilon(half, delta=DELTA), rel=1e-9)
  rdp_rep = acc.rdp_epsilon(ev, delta=DELTA, neighboring="replace_one")
  assert rdp_rep == pytest.approx(acc.rdp_epsilon(half, delta=DELTA), rel=1e-12)
  assert pld_rep <= rdp_rep
  # dp_accounting's raw RDP accountant would under-report replace-one here.
  raw = rdp_privacy_accountant.RdpAccountant(
    neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
  )
  raw.compose(ev)
  assert raw.get_epsilon(DELTA) < pld_rep
  # Enum form accepted.
  assert (
    acc.pld_epsilon(
      ev,
      delta=DELTA,
      neighboring=dp_accounting.NeighboringRelation.REPLACE_ONE,
    )
    == pld_rep
  )
  # Poisson under replace-one: PLD yes (larger than add/remove), RDP refuses.
  pois = acc.poisson_gaussian_event(
    noise_multiplier=2.0, sampling_probability=0.01, num_steps=200
  )
  assert acc.pld_epsilon(pois, delta=DELTA, neighboring="replace_one") > (
    acc.pld_epsilon(pois, delta=DELTA)
  )
  with pytest.raises(ValueError, match="replace_one"):
    acc.rdp_epsilon(pois, delta=DELTA, neighboring="replace_one")


def test_sampling_without_replacement_rdp_replace_one():
  """Fixed-size batches: RDP, replace-one only; batch = n is full batch."""
  full = _without_replacement(4.0, 100, 100, 20)
  ref = _full_batch(4.0, 20)
  assert acc.rdp_epsilon(full, delta=DELTA, neighboring="replace_one") == (
    pytest.approx(
      acc.rdp_epsilon(ref, delta=DELTA, neighboring="replace_one"),
      rel=1e-9,
    )
  )
  sub = _without_replacement(4.0, 10, 1000, 20)
  e_sub = acc.rdp_epsilon(sub, delta=DELTA, neighboring="replace_one")
  assert (
    0 < e_sub < acc.rdp_epsilon(full, delta=DELTA, neighboring="replace_one")
  )
  with pytest.raises(ValueError, match="RDP accountant cannot account"):
    acc.rdp_epsilon(sub, delta=DELTA)  # add/remove: unsupported
  with pytest.raises(ValueError, match="rdp_epsilon"):
    acc.pld_epsilon(sub, delta=DELTA, neighboring="replace_one")


def test_dpzero_advanced_composition_reference():
  """DPZero Alg. 2: sigma = 4C sqrt(2T log(e + eps/delta)) / (n eps)."""
  eps, delta, T, C, n = 2.0, 1e-5, 1000, 0.5, 2000
  sigma = acc.dpzero_advanced_composition_sigma(
    epsilon=eps, delta=delta, num_steps=T, clip=C, dataset_size=n
  )
  by_hand = 4 * 0.5 * math.sqrt(2 * 1000 * math.log(math.e + 2e5)) / (2000 * 2)
  assert sigma == pytest.approx(by_hand, rel=1e-12)
  nm = acc.dpzero_advanced_composition_noise_multiplier(
    epsilon=eps, delta=delta, num_steps=T
  )
  assert nm == pytest.approx(sigma * n / C, rel=1e-12)
  # Advanced composition is valid, so the tight replace-one PLD is below eps,
  # and clearly so (advanced composition is loose).
  ev = _full_batch(nm, T)
  tight = acc.pld_epsilon(ev, delta=delta, neighboring="replace_one")
  assert tight < eps
  assert tight < 0.6 * eps


def test_epsilon_report_side_by_side():
  rep = epsilon_report(
    _plan(noise_multiplier=16.4, sampling_probability=P_TABLE16),
    num_steps=T_TABLE16,
    delta=DELTA,
  )
  assert rep.pld_epsilon == pytest.approx(0.9988, abs=5e-4)
  assert rep.pld_epsilon == max(rep.pld_epsilon_add, rep.pld_epsilon_remove)
  assert rep.pld_epsilon < rep.rdp_epsilon < 1.2
  text = rep.format()
  assert "PLD epsilon" in text and "RDP epsilon" in text
  rep2 = epsilon_report(
    _plan(noise_multiplier=3.0, sampling_probability=0.04, num_queries=4),
    num_steps=400,
    delta=DELTA,
  )
  single = acc.poisson_gaussian_event(
    noise_multiplier=3.0, sampling_probability=0.04, num_steps=400
  )
  assert rep2.pld_epsilon == acc.pld_epsilon(single, delta=DELTA)


@pytest.mark.parametrize(
  "kwargs,match",
  [
    (
      dict(noise_multiplier=0.0, sampling_probability=0.1, num_steps=10),
      "noise_multiplier",
    ),
    (
      dict(noise_multiplier=-1.0, sampling_probability=0.1, num_steps=10),
      "noise_multiplier",
    ),
    (
      dict(noise_multiplier=1.0, sampling_probability=0.0, num_steps=10),
      "sampling_probability",
    ),
    (
      dict(noise_multiplier=1.0, sampling_probability=1.5, num_steps=10),
      "sampling_probability",
    ),
    (
      dict(noise_multiplier=1.0, sampling_probability=0.1, num_steps=0),
      "num_steps",
    ),
    (
      dict(noise_multiplier=1.0, sampling_probability=0.1, num_steps=2.5),
      "integer",
    ),
    (
      dict(noise_multiplier=1.0, sampling_probability=0.1, num_steps=True),
      "integer",
    ),
    (
      dict(
        noise_multiplier=float("nan"),
        sampling_probability=0.1,
        num_steps=10,
      ),
      "noise_multiplier",
    ),
  ],
)
def test_event_input_validation(kwargs, match):
  for fn in (acc.poisson_gaussian_event, acc.poisson_laplace_event):
    with pytest.raises(ValueError, match=match):
      fn(**kwargs)
  with pytest.raises(ValueError, match=match):
    acc.pure_epsilon_poisson_laplace(**kwargs)


def test_epsilon_input_validation():
  ev = acc.poisson_gaussian_event(
    noise_multiplier=1.0, sampling_probability=0.1, num_steps=10
  )
  for bad in (0.0, 1.0, -1e-5, 2.0):
    with pytest.raises(ValueError, match="delta"):
      acc.pld_epsilon(ev, delta=bad)
    with pytest.raises(ValueError, match="delta"):
      acc.rdp_epsilon(ev, delta=bad)
  with pytest.raises(ValueError, match="neighboring"):
    acc.pld_epsilon(ev, delta=DELTA, neighboring="substitute")
  with pytest.raises(ValueError, match="epsilon"):
    acc.dpzero_advanced_composition_sigma(
      epsilon=0.0, delta=1e-5, num_steps=10, clip=1.0, dataset_size=10
    )
  with pytest.raises(ValueError, match="num_queries"):
    _plan(noise_multiplier=1.0, num_queries=0, sampling_probability=0.1)


def test_epsilon_grows_with_steps_and_shrinks_with_noise():
  base = dict(sampling_probability=0.05)
  e = [
    acc.pld_epsilon(
      acc.poisson_gaussian_event(noise_multiplier=2.0, num_steps=T, **base),
      delta=DELTA,
    )
    for T in (10, 100, 1000)
  ]
  assert e[0] < e[1] < e[2]
  e = [
    acc.pld_epsilon(
      acc.poisson_gaussian_event(noise_multiplier=s, num_steps=100, **base),
      delta=DELTA,
    )
    for s in (1.0, 2.0, 4.0)
  ]
  assert e[0] > e[1] > e[2]
  assert np.all(np.isfinite(e))
