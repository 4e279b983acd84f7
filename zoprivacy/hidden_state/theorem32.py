"""Thm 3.2 (full batch) and Thm A.3 (mini-batch): the hidden-state bound.

Chien, Chen & Li, Thm 3.2: on the event ``G`` that Lemma 3.8's
concentration holds at every step of the window ``tau..T-1``, the final
iterate is ``(alpha, eps(alpha))``-RDP with ``eps(alpha)`` the minimum of
:mod:`zoprivacy.hidden_state.shift_program`'s program over ``tau``, the
splits ``beta_t`` and the shifts ``a_t``. ``1 - P(G) <= 2 (T - tau)
exp(-3 eps^2 dK / (12(d-K) + 8 eps (d-2K)))`` is added to delta: an
``(eps, delta)`` guarantee needs ``delta_conv + delta_G <= delta``.

:func:`hidden_state_bound` minimizes, numerically, over

* ``tau`` (every value, via the vectorized program),
* the shifts ``a_t`` (closed form, exact when ``c2 = 0``; see the program),
* ``beta_t`` when ``design=True`` (then the returned schedule must be the
  one the mechanism runs), otherwise the setting's own split is used,
* Lemma 3.8's concentration parameter ``eps`` (a log grid, then a finer
  grid around the best; always containing Cor. 3.3's ``(1-c^2)/(1+c^2)``),
* the Renyi order, inside each conversion,

separately for the standard and the improved RDP-to-DP conversion. Thm
3.1's composition bound also holds for the final iterate (post-processing)
and needs no event ``G``; where it is smaller it is returned instead, marked
``analysis='composition'`` (with ``c2 > 0`` the program cannot reach it at
``tau = 0``, since every shift must exceed ``c2``). The
point returned for each is the best candidate found; any feasible point is
a valid bound, and :meth:`HiddenStateBound.check` re-verifies feasibility.
For the mini-batch form (App. A.9, Thm A.3) the first term per step is
``min(K S_alpha(b/n, sqrt(K beta) sigma b / (2 Delta)), S_alpha(b/n,
sqrt(beta) sigma b / (2 Delta)))`` (the theorem and the remark after it).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from zoprivacy.hidden_state import baselines, shift_program
from zoprivacy.hidden_state import rdp as rdp_lib
from zoprivacy.hidden_state import setting as setting_lib

COARSE = np.geomspace(1e-3, 1e3, 61)


@dataclasses.dataclass(frozen=True)
class HiddenStatePoint:
  """The optimized bound for one conversion."""

  conversion: str
  epsilon: float
  tau: int
  concentration: float  # Lemma 3.8's eps
  lipschitz_factor: float  # c1
  failure_probability: float  # 1 - P(G), part of delta
  conversion_delta: float  # delta - failure_probability
  curve: rdp_lib.RdpCurve  # RDP of the final iterate on G
  solution: shift_program.WindowSolution | None
  analysis: str = "theorem_3_2"  # or "composition" (Thm 3.1, no event)


@dataclasses.dataclass(frozen=True)
class HiddenStateBound:
  """Thm 3.2 at ``num_steps`` and ``delta``, both conversions."""

  setting: setting_lib.NoisyZOGDSetting
  num_steps: int
  delta: float
  design: bool
  points: dict

  def epsilon(self, conversion: str = "improved") -> float:
    return self.points[conversion].epsilon

  def schedule(self, conversion: str = "improved") -> tuple[float, ...]:
    """``beta_t`` for ``t = 0..T-1``: the window's, and 1 before it."""
    point = self.points[conversion]
    if point.solution is None:
      return (
        self.setting.fractions(self.num_steps)
        if not self.design
        else (1.0,) * self.num_steps
      )
    head = (1.0,) * point.tau
    return head + tuple(float(b) for b in point.solution.fractions)

  def check(self, rtol: float = 1e-7) -> list[str]:
    """Re-verifies every constraint of every point; empty when feasible."""
    problems = []
    for name, pt in self.points.items():
      if pt.analysis == "composition":
        if pt.conversion_delta > self.delta * (1 + rtol):
          problems.append(f"{name}: total delta exceeds the target")
        continue
      prog = _program(
        self.setting,
        self.num_steps,
        pt.concentration,
        None if self.design else self.setting.fractions(self.num_steps),
      )
      problems += [f"{name}: {p}" for p in prog.check(pt.solution, rtol)]
      failure = self.setting.failure_probability(
        pt.concentration, self.num_steps - pt.tau
      )
      if failure > pt.failure_probability * (1 + rtol):
        problems.append(f"{name}: failure term understated")
      if pt.failure_probability + pt.conversion_delta > self.delta * (1 + rtol):
        problems.append(f"{name}: total delta exceeds the target")
      if not pt.conversion_delta > 0:
        problems.append(f"{name}: no delta left for the conversion")
    return problems


def _coefficients(setting):
  """``P`` and ``Q`` of the program (per unit alpha)."""
  s2 = setting.noise_std**2
  p2 = (2.0 * setting.clip / setting.divisor) ** 2 / (2.0 * s2)
  q2 = setting.dimension / (2.0 * setting.step_size**2 * s2)
  return p2, q2


def _program(setting, num_steps, concentration, fractions):
  p2, q2 = _coefficients(setting)
  shifts = setting.initial_shift(np.arange(num_steps))
  return shift_program.ShiftProgram(
    num_steps,
    setting.lipschitz_factor(concentration),
    setting.lipschitz_offset,
    shifts,
    p2,
    q2,
    fractions,
  )


def _failures(setting, concentration, num_steps):
  return setting.failure_probability(
    concentration, num_steps - np.arange(num_steps)
  )


def _first_term_curves(setting, fractions, orders):
  """Mini-batch: per distinct ``beta``, the per-step first-term RDP curve."""
  q = setting.batch_size / setting.dataset_size
  k, scale = (
    setting.num_directions,
    setting.noise_std * setting.batch_size / (2.0 * setting.clip),
  )
  curves = {}
  for beta in sorted(set(fractions)):
    whole = rdp_lib.subsampled_gaussian_rdp(
      q, math.sqrt(k * beta) * scale, orders
    ).scaled(k)
    each = rdp_lib.subsampled_gaussian_rdp(q, math.sqrt(beta) * scale, orders)
    fa, fb = whole.fn, each.fn
    fn = (
      None
      if fa is None or fb is None
      else (lambda a, fa=fa, fb=fb: min(fa(a), fb(a)))
    )
    curves[beta] = rdp_lib.RdpCurve(
      whole.orders, np.minimum(whole.rdp, each.rdp), fn
    )
  return curves


class _Search:
  """Candidates ``(eps, tau)`` and their epsilons, for one setting."""

  def __init__(self, setting, num_steps, delta, design, orders):
    self.setting, self.num_steps, self.delta = setting, num_steps, delta
    self.design, self.orders = design, np.asarray(orders, np.float64)
    self.fractions = None if design else setting.fractions(num_steps)
    self.minibatch = not setting.full_batch
    if self.minibatch:
      curves = _first_term_curves(setting, self.fractions, self.orders)
      arr = np.asarray(self.fractions)
      self.first = np.zeros((num_steps, len(self.orders)))
      self.first_fns = curves
      for beta, curve in curves.items():
        counts = np.cumsum((arr == beta)[::-1])[::-1]
        self.first += (
          counts[:, None]
          * np.where(np.isfinite(curve.rdp), curve.rdp, np.inf)[None, :]
        )
    self.best = {}  # conversion -> (eps value, concentration, tau)

  def _costs(self, prog):
    if self.minibatch:
      return prog.shift_costs()
    return prog.costs()

  def values(self, concentration: float, improved_at: str = "all") -> dict:
    """Per-``tau`` epsilons of the relaxed program, by conversion.

    The standard conversion is exact and cheap for every ``tau``; for the
    full batch the improved one is evaluated at every ``tau``
    (``improved_at='all'``) or only at the standard one's best ``tau``
    (``'argmin'``; others are inf).
    """
    prog = _program(self.setting, self.num_steps, concentration, self.fractions)
    cost = self._costs(prog)
    conv_delta = self.delta - _failures(
      self.setting, concentration, self.num_steps
    )
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
      if self.minibatch:
        rdp = self.first + np.outer(cost, self.orders)
        return {
          "standard": rdp_lib.standard_epsilons(self.orders, rdp, conv_delta),
          "improved": rdp_lib.improved_epsilons(self.orders, rdp, conv_delta),
        }
      log_inv = -np.log(np.where(conv_delta > 0, conv_delta, np.nan))
      std = cost + 2.0 * np.sqrt(cost * log_inv)
      std = np.where((conv_delta > 0) & np.isfinite(cost), std, np.inf)
      idx = (
        np.arange(self.num_steps)
        if improved_at == "all"
        else np.array([int(np.argmin(std))])
      )
      imp = np.full(self.num_steps, np.inf)
      imp[idx] = rdp_lib.improved_epsilons(
        self.orders, np.outer(cost[idx], self.orders), conv_delta[idx]
      )
    return {"standard": std, "improved": imp}

  def evaluate(self, concentration: float, full_improved: bool = False):
    values = self.values(concentration, "all" if full_improved else "argmin")
    for name, vals in values.items():
      tau = int(np.argmin(vals))
      val = float(vals[tau])
      if name not in self.best or val < self.best[name][0]:
        self.best[name] = (val, concentration, tau)
    return float(np.min(values["standard"]))


def hidden_state_bound(
  setting: setting_lib.NoisyZOGDSetting,
  num_steps: int,
  delta: float,
  *,
  design: bool = False,
  orders=None,
) -> HiddenStateBound:
  """The optimized Thm 3.2 / Thm A.3 bound on the final iterate ``w_T``.

  Args:
    setting: the run; its loss assumptions must be declared.
    num_steps: ``T >= 1``.
    delta: the target total delta (conversion plus failure term).
    design: optimize ``beta_t`` too (full batch only); the mechanism must
      then run :meth:`HiddenStateBound.schedule`.
    orders: Renyi orders of the search and of the returned curves (default
      :func:`zoprivacy.hidden_state.rdp.orders_for`).

  Returns:
    The bound for each conversion. A Thm 3.2 point is never returned when
    its failure term leaves no delta for the conversion; composition (which
    needs no event) is returned instead, marked ``analysis='composition'``.

  Raises:
    ValueError: undeclared assumptions, ``design`` with mini-batches.
  """
  setting.check_assumptions()
  if not isinstance(num_steps, int) or num_steps < 1:
    raise ValueError(f"num_steps must be an integer >= 1, got {num_steps!r}.")
  delta = rdp_lib.check_delta(delta)
  if design and not setting.full_batch:
    raise ValueError(
      "design=True optimizes beta_t for the full batch only; "
      "give the mini-batch setting a directional_fraction."
    )
  if orders is None:
    orders = rdp_lib.orders_for(setting)
  search = _Search(setting, num_steps, delta, design, orders)
  grid = list(COARSE)
  c = setting.contraction
  if c < 1:
    grid.append((1 - c * c) / (1 + c * c))  # Cor. 3.3's choice: c1 = 1
  grid = sorted(set(grid))
  values = [search.evaluate(e) for e in grid]
  best = int(np.argmin(values))
  lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
  for e in np.geomspace(lo, hi, 17)[1:-1]:
    search.evaluate(float(e))
  if not search.minibatch:
    search.evaluate(search.best["improved"][1], full_improved=True)
  composition = baselines.composition_rdp(
    setting.replace(directional_fraction=1.0) if design else setting,
    num_steps,
    orders,
  )
  points = {}
  for name in rdp_lib.CONVERSIONS:
    value, concentration, tau = search.best[name]
    eps = composition.epsilon(delta, name)
    if math.isfinite(value):
      points[name] = _point(search, name, concentration, tau)
    if not math.isfinite(value) or eps < points[name].epsilon:
      points[name] = HiddenStatePoint(
        name,
        eps,
        0,
        math.nan,
        math.nan,
        0.0,
        delta,
        composition,
        None,
        "composition",
      )
  return HiddenStateBound(setting, num_steps, delta, design, points)


def _point(search, conversion, concentration, tau) -> HiddenStatePoint:
  """The solution at ``(concentration, tau)``; if the closed form had to be
  repaired (``c2 > 0``), the next best ``tau`` are tried as well."""
  point = _point_at(search, conversion, concentration, tau)
  if point.solution.repaired:
    vals = search.values(concentration)[conversion]
    for other in np.argsort(vals)[:8]:
      if int(other) != tau and np.isfinite(vals[other]):
        trial = _point_at(search, conversion, concentration, int(other))
        if trial.epsilon < point.epsilon:
          point = trial
  return point


def _point_at(search, conversion, concentration, tau) -> HiddenStatePoint:
  setting = search.setting
  prog = _program(setting, search.num_steps, concentration, search.fractions)
  solution = prog.solve(tau)
  failure = setting.failure_probability(concentration, search.num_steps - tau)
  conv_delta = search.delta - failure
  if search.minibatch:
    shift = solution.shift_cost
    rdp = search.first[tau] + shift * search.orders
    counts = {}
    for beta in search.fractions[tau:]:
      counts[beta] = counts.get(beta, 0) + 1
    fns = [(search.first_fns[b].fn, n) for b, n in counts.items()]
    exact = all(f is not None for f, _ in fns)
    curve = rdp_lib.RdpCurve(
      search.orders,
      rdp,
      (lambda a: sum(n * f(a) for f, n in fns) + shift * a) if exact else None,
    )
  else:
    curve = rdp_lib.linear_curve(solution.cost, search.orders)
  eps = curve.epsilon(conv_delta, conversion)
  return HiddenStatePoint(
    conversion,
    eps,
    tau,
    concentration,
    setting.lipschitz_factor(concentration),
    failure,
    conv_delta,
    curve,
    solution,
  )
