"""Final-iterate accountants: Thm 3.1, 3.2, Cor. 3.3, App. A.9, conversions."""

import math

import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant
from scipy import integrate, optimize, stats

from zoprivacy.hidden_state import (
  baselines,
  closed_form,
  shift_program,
  theorem32,
)
from zoprivacy.hidden_state import rdp as rdp_lib
from zoprivacy.hidden_state import setting as setting_lib

DELTA = 1e-5
# The Fig. 1 setup (R = M = Delta = 1, m = 0.9, eta = K/M) with d = 10^4,
# n = 1000, sigma = 0.05.
FIG1 = setting_lib.LossAssumptions(
  smoothness=1.0, lipschitz=1.0, strong_convexity=0.9
)


def fig1(k=500, **changes):
  kw = dict(
    dimension=10_000,
    dataset_size=1000,
    num_directions=k,
    step_size=float(k),
    noise_std=0.05,
    clip=1.0,
    radius=1.0,
    smoothing=0.0,
    directional_fraction=1.0,
    assumptions=FIG1,
  )
  kw.update(changes)
  return setting_lib.NoisyZOGDSetting(**kw)


def test_hidden_state_saturates_in_t():
  eps = {
    t: theorem32.hidden_state_bound(fig1(), t, DELTA, design=True)
    for t in (300, 3000, 10_000)
  }
  print({t: round(b.epsilon(), 5) for t, b in eps.items()})
  # The optimal window T - tau stops growing: the same bound for every T.
  for conv in rdp_lib.CONVERSIONS:
    assert eps[10_000].epsilon(conv) == pytest.approx(
      eps[3000].epsilon(conv), rel=0.01
    )
    assert eps[300].epsilon(conv) == pytest.approx(
      eps[3000].epsilon(conv), rel=0.01
    )
  assert eps[10_000].points["improved"].tau > 9000


def test_hidden_state_below_composition_for_large_t():
  for t in (1000, 10_000):
    hidden = theorem32.hidden_state_bound(fig1(), t, DELTA, design=True)
    comp = baselines.composition_rdp(fig1(), t).epsilons(DELTA)
    print(
      t,
      {
        c: (round(hidden.epsilon(c), 3), round(comp[c], 3))
        for c in rdp_lib.CONVERSIONS
      },
    )
    for conv in rdp_lib.CONVERSIONS:
      assert hidden.epsilon(conv) < 0.6 * comp[conv]


def test_larger_k_lowers_hidden_state_epsilon_at_fixed_noise():
  eps = [
    theorem32.hidden_state_bound(fig1(k), 3000, DELTA, design=True).epsilon()
    for k in (200, 500, 1000, 2000)
  ]
  print(dict(zip((200, 500, 1000, 2000), np.round(eps, 4))))
  assert all(b < a for a, b in zip(eps, eps[1:]))
  # Composition cannot see K: the same directional-only epsilon for all.
  comp = [
    baselines.composition_rdp(fig1(k), 3000).epsilon(DELTA) for k in (200, 2000)
  ]
  assert comp[0] == pytest.approx(comp[1], rel=1e-12)


@pytest.mark.parametrize(
  "d, n, sigma, k, t",
  [
    (10_000, 1000, 0.05, 200, 3000),
    (10_000, 1000, 0.05, 500, 1000),
    (20_000, 500, 0.1, 400, 5000),
    (5000, 2000, 0.02, 250, 20_000),
    (10_000, 1000, 0.05, 1000, 50),
  ],
)
def test_corollary_33_never_below_theorem_32(d, n, sigma, k, t):
  xi = 2.0 / (n * k * math.sqrt(2 * d))  # Cor. 3.3's largest xi
  setting = fig1(k, dimension=d, dataset_size=n, noise_std=sigma, smoothing=xi)
  cor = closed_form.corollary33(setting, t, DELTA)
  thm = theorem32.hidden_state_bound(setting, t, DELTA, design=True)
  assert cor.valid, cor.failed
  for conv in rdp_lib.CONVERSIONS:
    print(conv, round(cor.epsilon(conv), 4), round(thm.epsilon(conv), 4))
    assert cor.epsilon(conv) >= thm.epsilon(conv) * (1 - 1e-9)
  assert thm.check() == []


@pytest.mark.parametrize("steps", [60, 400])
def test_minibatch_accountant_equals_full_batch_at_batch_size_n(steps):
  full = fig1(directional_fraction=0.6, smoothing=1e-6)
  mini = full.replace(batch_size=full.dataset_size)
  a = theorem32.hidden_state_bound(full, steps, DELTA)
  b = theorem32.hidden_state_bound(mini, steps, DELTA)
  for conv in rdp_lib.CONVERSIONS:
    assert b.epsilon(conv) == pytest.approx(a.epsilon(conv), rel=1e-9)
    assert baselines.composition_rdp(mini, steps).epsilon(DELTA, conv) == (
      pytest.approx(
        baselines.composition_rdp(full, steps).epsilon(DELTA, conv),
        rel=1e-9,
      )
    )
  print(steps, a.epsilon(), b.epsilon(), a.points["improved"].analysis)


def test_bounds_are_feasible_and_spend_at_most_delta():
  for design, fraction in ((True, 1.0), (False, 0.5), (False, 0.9)):
    bound = theorem32.hidden_state_bound(
      fig1(directional_fraction=fraction, smoothing=1e-7),
      2000,
      DELTA,
      design=design,
    )
    assert bound.check() == []
    for pt in bound.points.values():
      assert pt.failure_probability + pt.conversion_delta <= DELTA * (1 + 1e-12)
      assert pt.failure_probability > 0  # G is not free here
      assert pt.analysis == "theorem_3_2"
    if not design:  # the mechanism's own split is used
      np.testing.assert_array_equal(
        bound.points["improved"].solution.fractions, fraction
      )


def test_failure_term_needs_k_of_110_to_150():
  # m/M = 0.9, eta = K/M: c = 0.1; Cor. 3.3's eps = (1-c^2)/(1+c^2) makes
  # c1 = 1; window T - tau = 1000; failure <= 1e-6 first at K = 148.
  eps = (1 - 0.01) / (1 + 0.01)
  need = next(
    k
    for k in range(1, 1000)
    if fig1(k, dimension=10**6).failure_probability(eps, 1000) <= 1e-6
  )
  print("smallest K:", need)
  assert 110 <= need <= 150


def test_composition_endpoints_are_theorem_31():
  s = fig1(k=40)
  per_step = (2 * s.clip / s.dataset_size) ** 2 / (2 * s.noise_std**2)
  one = baselines.composition_rdp(s.replace(directional_fraction=1.0), 7)
  zero = baselines.composition_rdp(s.replace(directional_fraction=0.0), 7)
  np.testing.assert_allclose(one.rdp, 7 * per_step * one.orders, rtol=1e-12)
  np.testing.assert_allclose(
    zero.rdp, 7 * per_step * s.dimension / 40 * zero.orders, rtol=1e-12
  )


def test_output_perturbation_is_the_fig1_formula():
  s = fig1(k=300, directional_fraction=0.0)
  curve = baselines.output_perturbation_rdp(s)
  slope = (
    (2 * s.radius) ** 2 * s.dimension / (2 * s.step_size**2 * s.noise_std**2)
  )
  np.testing.assert_allclose(curve.rdp, slope * curve.orders, rtol=1e-12)
  strict = baselines.output_perturbation_rdp(s, strict=True)
  assert strict.rdp[0] > curve.rdp[0]


def test_closed_form_reports_failed_conditions():
  ok = closed_form.corollary33(fig1(500, smoothing=1e-9), 3000, DELTA)
  assert ok.valid and ok.epsilon() > 0
  bad = closed_form.corollary33(
    fig1(50, smoothing=1e-3, step_size=40.0), 10_000, DELTA
  )
  assert not bad.valid and bad.epsilon() is None
  names = {f.split(":")[0] for f in bad.failed}
  assert {"directions", "smoothing", "step_size", "failure"} <= names
  print(bad.failed)


def test_improved_conversion_matches_dp_accounting():
  rng = np.random.default_rng(0)
  orders = rdp_lib.DEFAULT_ORDERS
  for _ in range(5):
    rdp = rng.uniform(0.001, 0.5) * orders + rng.uniform(0, 0.1)
    delta = 10 ** rng.uniform(-9, -3)
    ours = rdp_lib.improved_epsilons(orders, rdp[None], np.array([delta]))[0]
    ref = rdp_privacy_accountant.compute_epsilon(orders, rdp, delta)[0]
    assert ours == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize(
  "q, sigma, alpha", [(0.1, 1.0, 2), (0.05, 2.0, 8), (0.3, 0.8, 3)]
)
def test_subsampled_rdp_bounds_the_papers_definition(q, sigma, alpha):
  # S_alpha(q, sigma) = D_alpha(N(0,s^2) || (1-q) N(0,s^2) + q N(1,s^2)).
  # The integrand p0 (mix / p0)^(1 - alpha), with mix / p0 in closed form.
  def integrand(x):
    ratio = (1 - q) + q * math.exp((2 * x - 1) / (2 * sigma**2))
    return stats.norm(0, sigma).pdf(x) * ratio ** (1 - alpha)

  paper = math.log(integrate.quad(integrand, -30, 30, limit=200)[0]) / (
    alpha - 1
  )
  ours = rdp_lib.subsampled_gaussian_rdp(q, sigma, [alpha]).rdp[0]
  print(q, sigma, alpha, paper, ours)
  assert ours >= paper * (1 - 1e-6)


def _brute(t, tau, c1, c2, d, p2, q2, fractions):
  n = t - tau

  def z_values(a):
    z = np.zeros(n + 1)
    for i in range(n - 1, -1, -1):
      z[i] = (z[i + 1] + a[i] - c2) / c1
    return z

  free = fractions is None

  def cost(x):
    a, b = (x[:n], x[n:]) if free else (x, np.asarray(fractions[tau:]))
    return np.sum(p2 / b + q2 * a**2 / (1 - b))

  cons = [{"type": "ineq", "fun": lambda x: z_values(x[:n])[0] - d}]
  if n > 1:
    cons.append({"type": "ineq", "fun": lambda x: z_values(x[:n])[1:n]})
  x0 = np.full(2 * n if free else n, 0.5)
  bounds = [(0, None)] * n + ([(1e-6, 1 - 1e-6)] * n if free else [])
  res = optimize.minimize(
    cost,
    x0,
    bounds=bounds,
    constraints=cons,
    method="SLSQP",
    options={"maxiter": 500, "ftol": 1e-12},
  )
  return res.fun


@pytest.mark.parametrize(
  "c1, c2, free",
  [
    (0.7, 0.3, False),
    (0.95, 0.0, True),
    (1.0, 0.05, False),
    (1.1, 0.3, True),
    (0.95, 0.3, True),
  ],
)
def test_shift_program_matches_a_generic_solver(c1, c2, free):
  t = 5
  shifts = np.minimum(2.0, 0.4 * np.arange(t))
  fractions = None if free else np.array([0.3, 0.5, 0.7, 0.4, 0.6])
  prog = shift_program.ShiftProgram(t, c1, c2, shifts, 0.4, 1.3, fractions)
  for tau in range(t):
    sol = prog.solve(tau)
    assert prog.check(sol) == []
    ref = _brute(t, tau, c1, c2, shifts[tau], 0.4, 1.3, fractions)
    assert sol.cost == pytest.approx(ref, rel=1e-4, abs=1e-6)


def test_no_bound_when_the_failure_term_uses_up_delta(monkeypatch):
  # If every candidate's failure term were >= delta, no Thm 3.2 bound is
  # returned: only composition, which needs no event G.
  monkeypatch.setattr(theorem32, "_failures", lambda setting, e, t: np.ones(t))
  bound = theorem32.hidden_state_bound(fig1(), 3000, DELTA, design=True)
  comp = baselines.composition_rdp(fig1(), 3000)
  for conv, pt in bound.points.items():
    assert pt.analysis == "composition" and pt.failure_probability == 0.0
    assert pt.epsilon == pytest.approx(comp.epsilon(DELTA, conv))
