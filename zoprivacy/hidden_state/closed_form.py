"""Cor. 3.3: the closed-form final-iterate bound for strongly convex losses.

Chien, Chen & Li, Cor. 3.3 and its proof (App. A.5), with every constant
kept. Assumptions: ``m``-strong convexity, ``eta = K/M`` (so ``c = 1 -
m/M``), ``xi <= 2 Delta / (n eta M sqrt(2d))``, full batch, and

  max(20 (1+c^2)^2 / (3 (1-c^2)^2) log((4/delta) ceil(R n sqrt(2d) /
      (eta Delta))), 1) <= K <= d/2                         (eq. (32)).

The proof takes ``eps = (1-c^2)/(1+c^2)`` (so ``c1 = 1``), ``beta_t = 1/2``
on the window and equal shifts, and bounds the RDP by eq. (27):

  eps(alpha) <= L 2 alpha (2 Delta/n)^2 / sigma^2 + 4 alpha (2R)^2 d /
                (L eta^2 sigma^2),   L = T - tau = ceil(n R sqrt(2d) /
                (Delta eta))                                  (eq. (28)),

with ``delta/2`` for the conversion and ``delta/2`` for the failure term
``2 L exp(-(3K/20) eps^2)`` (eq. (31)). For ``T < L`` it takes ``tau = 0``
and ``beta_t = 1``: eq. (33), the composition bound, which needs no event.
Eq. (29) states the minimized value as ``8 alpha Delta R sqrt(2d) / (eta n
sigma^2)``; evaluating eq. (27) at eq. (28) gives twice that, and the value
returned here is eq. (27)'s. The main text writes the ``log`` term of the
condition on ``K`` as ``log((4/delta) ceil(M R n sqrt(2d) / Delta))``, which
is larger; both are reported.
"""

from __future__ import annotations

import dataclasses
import math

from zoprivacy.hidden_state import rdp as rdp_lib
from zoprivacy.hidden_state import setting as setting_lib


def _ratio(c: float) -> float:
  return (1.0 - c * c) / (1.0 + c * c)


def saturation_window(setting: setting_lib.NoisyZOGDSetting) -> int:
  """``ceil(n R sqrt(2d) / (Delta eta))``, eq. (28)."""
  return math.ceil(
    setting.dataset_size
    * setting.radius
    * math.sqrt(2 * setting.dimension)
    / (setting.clip * setting.step_size)
  )


def minimum_directions(
  setting: setting_lib.NoisyZOGDSetting, delta: float, main_text: bool = False
) -> float:
  """The lower end of Cor. 3.3's range for ``K`` (eq. (32); main text)."""
  a = setting.require_assumptions()
  c = 1.0 - a.condition_ratio
  if main_text:
    count = math.ceil(
      a.smoothness
      * setting.radius
      * setting.dataset_size
      * math.sqrt(2 * setting.dimension)
      / setting.clip
    )
  else:
    count = saturation_window(setting)
  if c >= 1.0:
    return math.inf
  bound = 20.0 / (3.0 * _ratio(c) ** 2) * math.log(4.0 / delta * count)
  return max(bound, 1.0)


@dataclasses.dataclass(frozen=True)
class Corollary33:
  """The closed form, its conditions, and what it returns.

  ``conditions`` maps a name to ``(holds, explanation)``; the bound is
  ``valid`` when all hold. ``epsilon`` then gives it for a conversion.
  """

  setting: setting_lib.NoisyZOGDSetting
  num_steps: int
  delta: float
  window: int
  rdp_slope: float
  failure_probability: float
  conversion_delta: float
  conditions: dict

  @property
  def valid(self) -> bool:
    return all(ok for ok, _ in self.conditions.values())

  @property
  def failed(self) -> list[str]:
    return [
      f"{name}: {msg}" for name, (ok, msg) in self.conditions.items() if not ok
    ]

  def curve(self, orders=rdp_lib.DEFAULT_ORDERS) -> rdp_lib.RdpCurve:
    return rdp_lib.linear_curve(self.rdp_slope, orders)

  def epsilon(self, conversion: str = "standard") -> float | None:
    """``None`` when a condition fails (see :attr:`failed`)."""
    if not self.valid:
      return None
    return self.curve().epsilon(self.conversion_delta, conversion)

  def schedule(self) -> tuple[float, ...]:
    """The split the proof assumes: 1 before the window, 1/2 on it."""
    if self.window >= self.num_steps:
      return (1.0,) * self.num_steps
    return (1.0,) * (self.num_steps - self.window) + (0.5,) * self.window


def corollary33(
  setting: setting_lib.NoisyZOGDSetting,
  num_steps: int,
  delta: float,
  *,
  own_split: bool = True,
) -> Corollary33:
  """Cor. 3.3's bound at ``num_steps``, with its conditions checked.

  Args:
    setting: the run (declared assumptions needed).
    num_steps: ``T``.
    delta: total delta.
    own_split: the bound is for the proof's split (:meth:`schedule`); when
      False, the setting's own ``directional_fraction`` must equal it.
  """
  a = setting.require_assumptions()
  delta = rdp_lib.check_delta(delta)
  cond = _setting_conditions(setting, a, delta)
  window = saturation_window(setting)
  if num_steps >= window:
    slope, failure, conv_delta, cond["failure"] = _saturated_bound(
      setting, a, window, delta
    )
  else:
    n, s2 = setting.dataset_size, setting.noise_std**2
    slope = num_steps * (2.0 * setting.clip / n) ** 2 / (2.0 * s2)
    failure, conv_delta = 0.0, delta
  if not own_split:
    cond["split"] = _split_condition(setting, num_steps, window)
  return Corollary33(
    setting,
    num_steps,
    delta,
    min(window, num_steps),
    slope,
    failure,
    conv_delta,
    cond,
  )


def _setting_conditions(setting, a, delta) -> dict:
  """Cor. 3.3's conditions on the run, ``name -> (holds, explanation)``:
  ``m > 0``, ``eta = K/M``, full batch, ``K`` in eq. (32)'s range and ``xi
  <= 2 Delta / (n eta M sqrt(2d))``."""
  k, d, n = setting.num_directions, setting.dimension, setting.dataset_size
  cond = {}
  cond["strong_convexity"] = (
    a.strong_convexity > 0,
    f"m = {a.strong_convexity} must be > 0",
  )
  target_eta = k / a.smoothness
  cond["step_size"] = (
    math.isclose(setting.step_size, target_eta, rel_tol=1e-9),
    f"eta = {setting.step_size:g} must equal K/M = {target_eta:g}",
  )
  cond["full_batch"] = (setting.full_batch, "Cor. 3.3 is for the full batch")
  k_min = minimum_directions(setting, delta)
  cond["directions"] = (
    k_min <= k <= d / 2,
    f"K = {k} must lie in [{k_min:.1f}, d/2 = {d / 2:g}] (eq. (32))",
  )
  xi_max = (
    2.0
    * setting.clip
    / (n * setting.step_size * a.smoothness * math.sqrt(2 * d))
  )
  cond["smoothing"] = (
    setting.smoothing <= xi_max * (1 + 1e-12),
    f"xi = {setting.smoothing:g} must be <= 2 Delta / "
    f"(n eta M sqrt(2d)) = {xi_max:.3g}",
  )
  return cond


def _saturated_bound(setting, a, window, delta):
  """``T >= L``: eq. (27)'s RDP slope at ``L`` = eq. (28), the failure term
  ``2 L exp(-(3K/20) eps^2)`` (eq. (31)) and ``delta/2`` for the
  conversion: ``(slope, failure, conversion delta, failure condition)``."""
  k, d, n = setting.num_directions, setting.dimension, setting.dataset_size
  s2 = setting.noise_std**2
  slope = window * 2.0 * (2.0 * setting.clip / n) ** 2 / s2 + 4.0 * (
    2.0 * setting.radius
  ) ** 2 * d / (window * setting.step_size**2 * s2)
  ratio = _ratio(1.0 - a.condition_ratio)
  failure = min(1.0, 2.0 * window * math.exp(-0.15 * k * ratio**2))
  condition = (
    failure <= delta / 2.0 * (1 + 1e-12),
    f"failure term {failure:.3g} must be <= delta/2",
  )
  return slope, failure, delta / 2.0, condition


def _split_condition(setting, num_steps, window):
  """Whether the setting's own ``directional_fraction`` is the proof's split
  (1 before the window, 1/2 on it; all 1 when ``T < L``)."""
  wanted = (1.0,) * max(num_steps - window, 0) + (0.5,) * min(window, num_steps)
  if num_steps < window:
    wanted = (1.0,) * num_steps
  return (
    setting.fractions(num_steps) == wanted,
    "the mechanism must run beta_t = 1/2 on the window",
  )
