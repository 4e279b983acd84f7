"""The constrained minimization inside Thm 3.2, for a fixed ``epsilon``.

Chien, Chen & Li, Thm 3.2: for every ``tau``,

  eps(alpha) <= sum_{t=tau}^{T-1} [alpha P / beta_t
                                   + alpha Q a_t^2 / (1 - beta_t)]

with ``P = (2 Delta/n)^2 / (2 sigma^2)``, ``Q = d / (2 eta^2 sigma^2)``,
over shifts ``a_t >= 0`` whose recursion ``z_t = (z_{t+1} + a_t - c2) / c1``
from ``z_T = 0`` keeps ``z_t >= 0`` and reaches ``z_tau >= D(tau) = min(2R,
2 eta Delta tau / sqrt(K))``. (The paper indexes the recursion as ``z_{t-1}
= c1^{-1}(z_t + a_t - c2)``; the proof applies ``a_t`` at step ``t -> t+1``,
which is the form used here.)

Multiplying ``z_t`` by ``c1^{T-t+1}`` turns the recursion into suffix sums
with weights ``v_t = c1^{T-t}``: ``Y_t = sum_{s>=t} v_s (a_s - c2)``,
``z_t >= 0  <=>  Y_t >= 0`` and ``z_tau >= D  <=>  Y_tau >= D c1^{L+1}`` with
``L = T - tau``. Dropping the intermediate ``Y_t >= 0`` (``t > tau``) leaves
one linear constraint ``sum_t v_t a_t >= D_hat = D c1^{L+1} + c2 sum_t v_t``,
solved in closed form:

* fixed ``beta_t`` (the mechanism's split): ``a_t = D_hat v_t (1-beta_t) /
  S``, cost ``Q D_hat^2 / S`` with ``S = sum_t v_t^2 (1 - beta_t)``;
* ``beta_t`` free (design, full batch): minimizing over ``beta`` first gives
  ``(sqrt(P) + sqrt(Q) a_t)^2`` at ``beta_t = sqrt(P) / (sqrt(P) + sqrt(Q)
  a_t)``; the ``a_t`` are a water-filling ``a_t = max(0, mu v_t - p) / q``
  whose active set is found by bisection (it is a prefix of the ``v_t``
  sorted in decreasing order).

All sums are geometric or cumulative and kept in log space, so every ``tau``
is evaluated at once in ``O(T log T)``. When ``c2 = 0`` the relaxation is
exact. Otherwise :meth:`ShiftProgram.solve` checks the dropped constraints
and, if one fails, raises ``a_t`` from the last step backwards until every
``z_t >= 0``: a feasible point (a valid bound) that is then no longer
proven optimal, which the solution records.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import optimize, sparse

_NEG_INF = -np.inf


def log_geometric(log_r: float, lo, count):
  """``log sum_{i=lo}^{lo+count-1} r^i`` for ``count >= 1`` (vectorized).

  ``r^lo (r^m - 1) / (r - 1)`` evaluated with ``expm1`` on the side that
  does not overflow; ``log_r`` is a scalar.
  """
  lr = float(log_r)
  lo = np.asarray(lo, np.float64)
  count = np.asarray(count, np.float64)
  if lr == 0.0:
    return np.log(count) + 0.0 * lo
  x = count * lr
  with np.errstate(divide="ignore"):
    if lr > 0:
      ratio = x + np.log(-np.expm1(-x)) - (lr + math.log(-math.expm1(-lr)))
    else:
      ratio = np.log(-np.expm1(x)) - math.log(-math.expm1(lr))
  return lo * lr + ratio


def _log(x):
  with np.errstate(divide="ignore"):
    return np.log(x)


@dataclasses.dataclass(frozen=True)
class WindowSolution:
  """The shifts and splits of one ``tau`` (arrays over ``t = tau..T-1``)."""

  tau: int
  shifts: np.ndarray
  fractions: np.ndarray
  cost: float  # sum_t P/beta_t + Q a_t^2/(1-beta_t), per unit alpha
  shift_cost: float  # sum_t Q a_t^2 / (1 - beta_t)
  repaired: bool


class ShiftProgram:
  """Thm 3.2's program at fixed ``(c1, c2)`` for every ``tau`` at once.

  Args:
    num_steps: ``T``.
    c1: Lipschitz factor (Lemma 3.8), ``> 0``.
    c2: offset ``eta M xi >= 0``.
    initial_shifts: ``D(tau)`` for ``tau = 0..T-1``.
    p2: ``P`` (first-term coefficient per unit ``alpha``).
    q2: ``Q``.
    fractions: ``beta_t`` for ``t = 0..T-1`` (fixed split), or ``None`` to
      optimize the split (``beta_t`` free).
  """

  def __init__(
    self,
    num_steps: int,
    c1: float,
    c2: float,
    initial_shifts,
    p2: float,
    q2: float,
    fractions=None,
  ):
    self.num_steps = int(num_steps)
    self.c1, self.c2 = float(c1), float(c2)
    self.log_c1 = math.log(self.c1)
    self.initial_shifts = np.asarray(initial_shifts, np.float64)
    self.p, self.q = math.sqrt(p2), math.sqrt(q2)
    self.fractions = (
      None if fractions is None else np.asarray(fractions, np.float64)
    )
    t = np.arange(self.num_steps)
    self.window = self.num_steps - t  # L(tau)
    self.log_v = (self.num_steps - t) * self.log_c1  # log v_t
    self.log_s1 = log_geometric(self.log_c1, 1, self.window)
    log_d = _log(self.initial_shifts) + (self.window + 1) * self.log_c1
    self.log_dhat = np.logaddexp(log_d, _log(self.c2) + self.log_s1)

  # -------------------------------------------------------------- values
  def first_term(self) -> np.ndarray:
    """``sum_{t>=tau} P / beta_t`` per ``tau`` (fixed split)."""
    with np.errstate(divide="ignore"):
      per_step = self.p**2 / self.fractions
    return np.cumsum(per_step[::-1])[::-1]

  def _log_weight_sums(self):
    with np.errstate(divide="ignore"):
      terms = 2 * self.log_v + np.log1p(-self.fractions)
    return np.logaddexp.accumulate(terms[::-1])[::-1]

  def shift_costs(self) -> np.ndarray:
    """``min_a sum_t Q a_t^2 / (1 - beta_t)`` per ``tau`` (fixed split)."""
    log_s = self._log_weight_sums()
    with np.errstate(over="ignore", invalid="ignore"):
      cost = np.exp(np.log(self.q**2) + 2 * self.log_dhat - log_s)
    return np.where(np.isneginf(self.log_dhat), 0.0, cost)

  def _top_sums(self, count, window=None):
    """``log`` of the sums of the ``count`` largest ``v`` and ``v^2``.

    Descending ``v`` is ``c1^1, c1^2, ...`` for ``c1 <= 1`` and ``c1^L,
    c1^(L-1), ...`` for ``c1 > 1``; ``window`` is ``L`` (default: per tau).
    """
    window = self.window if window is None else window
    if self.log_c1 <= 0:
      lo = np.ones_like(count)
    else:
      lo = window - count + 1
    g1 = log_geometric(self.log_c1, lo, np.maximum(count, 1))
    g2 = log_geometric(2 * self.log_c1, lo, np.maximum(count, 1))
    log_smallest = np.where(self.log_c1 <= 0, count, lo) * self.log_c1
    return g1, g2, log_smallest

  def _active(self, count) -> np.ndarray:
    g1, g2, log_v = self._top_sums(count)
    log_num = np.logaddexp(
      math.log(self.q) + self.log_dhat, math.log(self.p) + g1
    )
    return (log_num - g2 + log_v > math.log(self.p)) | (count == 0)

  def free_counts(self) -> np.ndarray:
    """Size of the water-filling active set per ``tau`` (bisection)."""
    lo = np.zeros(self.num_steps, np.int64)
    hi = self.window.astype(np.int64)
    while np.any(hi > lo):
      mid = (lo + hi + 1) // 2
      ok = self._active(mid)
      lo = np.where(ok, mid, lo)
      hi = np.where(ok, hi, mid - 1)
    return lo

  def free_costs(self) -> np.ndarray:
    """``min over a, beta`` of the whole sum, per ``tau`` (split free)."""
    count = self.free_counts()
    g1, g2, _ = self._top_sums(count)
    log_num = np.logaddexp(
      math.log(self.q) + self.log_dhat, math.log(self.p) + g1
    )
    with np.errstate(over="ignore"):
      active = np.exp(2 * log_num - g2)
    return np.where(count > 0, active, 0.0) + (self.window - count) * self.p**2

  def costs(self) -> np.ndarray:
    """Per-``tau`` cost per unit ``alpha`` (full batch)."""
    if self.fractions is None:
      return self.free_costs()
    with np.errstate(invalid="ignore"):
      return self.first_term() + self.shift_costs()

  # ------------------------------------------------------------ solution
  def solve(self, tau: int) -> WindowSolution:
    """The shifts (and splits) at ``tau``, repaired to feasibility if needed."""
    tau = int(tau)
    log_v = self.log_v[tau:]
    log_dhat = self.log_dhat[tau]
    if self.fractions is None:
      count = int(self.free_counts()[tau])
      g1, g2, _ = self._top_sums(
        np.array([count]), np.array([self.num_steps - tau])
      )
      if count == 0:
        shifts = np.zeros(self.num_steps - tau)
      else:
        log_mu = (
          np.logaddexp(math.log(self.q) + log_dhat, math.log(self.p) + g1[0])
          - g2[0]
        )
        shifts = np.maximum(np.exp(log_mu + log_v) - self.p, 0.0) / self.q
    else:
      log_s = self._log_weight_sums()[tau]
      with np.errstate(divide="ignore"):
        log_w = np.log1p(-self.fractions[tau:])
      shifts = (
        np.zeros_like(log_v)
        if np.isneginf(log_dhat)
        else np.exp(log_dhat + log_v + log_w - log_s)
      )
    shifts, repaired = self._repair(tau, shifts)
    return self._solution(tau, shifts, repaired)

  def _repair(self, tau: int, shifts: np.ndarray):
    """Feasibility for the dropped constraints ``z_t >= 0`` (``t > tau``).

    Returns ``(shifts, repaired)``. If the closed form violates none, it is
    the optimum. Otherwise shifts are raised from the last step backwards
    until every ``z_t >= 0`` (feasible); with a fixed split the exact
    optimum is then found as a bound-constrained least-squares problem in
    ``z`` (``a_t = c1 z_t - z_{t+1} + c2``; a negative ``a_t`` never helps,
    so ``a >= 0`` holds at the optimum), and with a free split a few rounds
    of alternating minimization over ``beta`` and ``z`` improve the point.
    """
    scale = np.exp(self.log_v[tau:] - np.max(self.log_v[tau:]))
    shifts = shifts.copy()
    excess = scale * (shifts - self.c2)
    suffix = np.cumsum(excess[::-1])[::-1]
    tol = 1e-12 * max(1.0, float(np.max(np.abs(excess))))
    if np.all(suffix[1:] >= -tol):
      return shifts, False
    running = 0.0
    for i in range(len(shifts) - 1, -1, -1):
      running += scale[i] * (shifts[i] - self.c2)
      if running < 0:
        shifts[i] += -running / scale[i]
        running = 0.0
    if self.fractions is not None:
      weights = self.q**2 / (1.0 - np.minimum(self.fractions[tau:], 1 - 1e-15))
      return self._least_squares(tau, weights, shifts), True
    best = self._solution(tau, shifts, True)
    for _ in range(20):
      fractions = self.p / (self.p + self.q * best.shifts)
      weights = self.q**2 / np.maximum(1.0 - fractions, 1e-15)
      trial = self._solution(
        tau, self._least_squares(tau, weights, best.shifts), True
      )
      if not trial.cost < best.cost * (1 - 1e-12):
        break
      best = trial
    return best.shifts, True

  def _least_squares(self, tau: int, weights, start):
    """``min sum_t w_t (c1 z_t - z_{t+1} + c2)^2``, ``z >= 0``, ``z_tau >= D``."""
    n = self.num_steps - tau
    root = np.sqrt(weights)
    rows = np.arange(n)
    matrix = sparse.coo_matrix(
      (
        np.concatenate([root * self.c1, -root[:-1]]),
        (
          np.concatenate([rows, rows[:-1]]),
          np.concatenate([rows, rows[1:]]),
        ),
      ),
      shape=(n, n),
    ).tocsr()
    lower = np.zeros(n)
    lower[0] = self.initial_shifts[tau]
    if n <= 1500:  # exact active-set solver on the dense matrix
      res = optimize.lsq_linear(
        matrix.toarray(),
        -root * self.c2,
        bounds=(lower, np.inf),
        method="bvls",
      )
    else:
      res = optimize.lsq_linear(
        matrix,
        -root * self.c2,
        bounds=(lower, np.inf),
        method="trf",
        tol=1e-10,
        lsmr_tol="auto",
        max_iter=500,
      )
    z = np.append(res.x, 0.0)
    shifts = np.maximum(self.c1 * z[:-1] - z[1:] + self.c2, 0.0)
    # Re-impose feasibility exactly (the solver's tolerance), from the end.
    scale = np.exp(self.log_v[tau:] - np.max(self.log_v[tau:]))
    running = 0.0
    for i in range(n - 1, -1, -1):
      running += scale[i] * (shifts[i] - self.c2)
      if running < 0:
        shifts[i] += -running / scale[i]
        running = 0.0
    need = self.initial_shifts[tau] * math.exp(
      (n + 1) * self.log_c1 - np.max(self.log_v[tau:])
    )
    if running < need:
      shifts[int(np.argmax(scale))] += (need - running) / np.max(scale)
    candidate = self._solution(tau, shifts, True)
    fallback = self._solution(tau, np.asarray(start), True)
    return shifts if candidate.cost <= fallback.cost else np.asarray(start)

  def _solution(self, tau: int, shifts, repaired) -> WindowSolution:
    if self.fractions is None:
      fractions = self.p / (self.p + self.q * shifts)
    else:
      fractions = self.fractions[tau:]
    with np.errstate(divide="ignore", invalid="ignore"):
      shift = np.where(
        shifts > 0, self.q**2 * shifts**2 / (1.0 - fractions), 0.0
      )
      first = self.p**2 / fractions
    return WindowSolution(
      tau,
      shifts,
      fractions,
      float(np.sum(first + shift)),
      float(np.sum(shift)),
      repaired,
    )

  def check(self, solution: WindowSolution, rtol: float = 1e-7) -> list[str]:
    """The constraints ``solution`` violates (empty: feasible)."""
    tau, a = solution.tau, solution.shifts
    problems = []
    if np.any(a < 0):
      problems.append("a negative shift a_t")
    if np.any((solution.fractions < 0) | (solution.fractions > 1)):
      problems.append("a directional fraction outside [0, 1]")
    log_v = self.log_v[tau:]
    top = np.max(log_v)
    scale = np.exp(log_v - top)
    suffix = np.cumsum((scale * (a - self.c2))[::-1])[::-1]
    tol = rtol * max(1.0, float(np.max(np.abs(scale * (a - self.c2)))))
    if np.any(suffix[1:] < -tol):
      problems.append("an intermediate shift z_t < 0")
    need = self.initial_shifts[tau] * math.exp(
      (self.num_steps - tau + 1) * self.log_c1 - top
    )
    if suffix[0] < need * (1 - rtol) - tol:
      problems.append(f"z_tau below D(tau) = {self.initial_shifts[tau]:g}")
    return problems
