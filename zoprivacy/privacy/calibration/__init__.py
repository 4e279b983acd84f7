"""THE calibration: the smallest noise multiplier that meets a target.

:func:`calibrate` takes a :class:`~zoprivacy.Privacy` value, or a
:class:`~zoprivacy.privacy.PrivacyPlan`, and a :class:`~zoprivacy.Target`
``(epsilon, delta, num_steps)``, and returns the same kind of object at the
smallest multiplier (to ``rtol``, 0.2% by default) whose epsilon meets the
target. Every calibration of the project is this function:
``Privacy.calibrate`` (and so every estimator given an uncalibrated value),
the runner, the tuner (under its repeat-and-select epsilon, ``epsilon_of=``)
and the audit builder; nothing else searches a noise multiplier.
:func:`calibrate_noise_multiplier` is the search alone, for a mechanism
named by a string (its :class:`CalibrationResult` says how it went).

Method (every epsilon is computed by dp_accounting; no mechanism is named
here: the mechanism value states where the search starts):

1. **Warm start.** A safeguarded secant search in ``(log sigma, log eps)``
   on the *fine* (interval ``1e-4``) pessimistic PLD epsilon of the plan's
   own event factory (:meth:`PrivacyPlan.step_event_at`), with the
   mechanism the value names for calibration
   (``mechanism.calibration_value()``: itself, or the discrete mechanism's
   continuous counterpart, within a fraction of a percent). It starts at
   the mechanism's ``first_point`` (the Gaussian's central-limit estimate)
   below its ``warm_start`` (RDP or pure DP: feasible,
   :mod:`~zoprivacy.accounting.search_start`), keeps a bracket ``[lo, hi]``
   with ``eps(lo) > target >= eps(hi)`` and stops when ``hi / lo <= 1 +
   rtol``, usually after 2-4 fine evaluations (cached). A multiplier too
   small to account (its PLD would not fit in memory) counts as infinite
   epsilon once a feasible one is known. The result may be read from an
   on-disk cache (``ZOPRIVACY_CALIBRATION_CACHE_DIR``, off by default): a
   deterministic function of public numbers, keyed by their SHA-256.
2. **The plan's own epsilon.** The multiplier is raised by factors of ``1
   + rtol`` from the warm start until the plan's own epsilon (what the
   ledger and every report compute) meets the target: the first raise
   that does, found by secant steps and bisection on the raise. Step 2
   always runs, so a stale or edited cache entry can cost utility, never
   privacy.

With ``epsilon_of=`` (another accountant of the same plan, e.g. the tuner's
total over its trials) step 1's search runs on that epsilon directly, from
multiplier 1, and its feasible end is returned.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable
from importlib import metadata

from zoprivacy.accounting import relations
from zoprivacy.accounting.dp_warnings import summarize_warnings
from zoprivacy.privacy import plan as plan_lib
from zoprivacy.privacy import sampling_scheme
from zoprivacy.privacy.calibration import noise_search
from zoprivacy.privacy.calibration.noise_search import CalibrationResult

CACHE_VAR = "ZOPRIVACY_CALIBRATION_CACHE_DIR"
CACHE_FORMAT = 1

# ------------------------------------------------------------- the one entry


@summarize_warnings
def calibrate(
  subject,
  target=None,
  *,
  estimator=None,
  epsilon_of: Callable | None = None,
  rtol: float = 2e-3,
  **hyperparameters,
):
  """``subject`` (a :class:`~zoprivacy.Privacy` value or a
  :class:`~zoprivacy.privacy.PrivacyPlan`) at the smallest noise multiplier
  (to ``rtol``) whose epsilon meets ``target``.

  Args:
    subject: a value (its plan, of ``estimator(value, **hyperparameters)``
      when given, is calibrated; the value returned keeps the target and
      records the plan as ``calibrated_plan``) or a plan (returned with the
      target's ``delta``).
    target: a :class:`~zoprivacy.Target`; a value's own when ``None``.
    epsilon_of: the epsilon to meet, as a function of the plan (whose
      ``delta`` is the target's); by default the plan's own,
      ``plan.epsilon(target.num_steps)``.
    rtol: the relative precision of the multiplier.

  Raises:
    ValueError: no target, a non-private plan, or no multiplier in range
      meets the target.
  """
  if isinstance(subject, plan_lib.PrivacyPlan):
    if target is None or hyperparameters or estimator is not None:
      raise TypeError(
        "calibrate(plan, target) takes a plan and a zoprivacy.Target only."
      )
    if not target.resolved:
      raise ValueError(
        f"Target(num_epochs={target.num_epochs:g}) counts its steps on a "
        "privacy value's sampling, which a plan does not hold: calibrate "
        "the value (privacy.calibrate(target)), or give num_steps."
      )
    return _calibrated_plan(subject, target, epsilon_of, rtol)
  if not all(hasattr(subject, a) for a in ("target", "plan", "replace")):
    raise TypeError(
      "calibrate(subject, target) takes a zoprivacy.Privacy value or a "
      f"zoprivacy.privacy.PrivacyPlan, got {type(subject).__name__}."
    )
  target = subject.target if target is None else target
  if target is None:
    raise ValueError(
      "Calibration needs a target: privacy.calibrate(zoprivacy.Target("
      "epsilon=2.0, delta=1e-5, num_steps=T or num_epochs=E)), or a value "
      "built with target=."
    )
  template = subject.replace(noise_multiplier=1.0, target=target)
  target = template.target  # its steps counted on the sampling (epochs)
  plan = _calibrated_plan(
    template.plan(estimator, **hyperparameters), target, epsilon_of, rtol
  )
  out = template.replace(noise_multiplier=plan.noise_multiplier)
  object.__setattr__(out, "calibrated_plan", plan)
  return out


@summarize_warnings
def calibrate_noise_multiplier(
  *,
  target_epsilon: float,
  delta: float,
  sampling_probability: float,
  num_steps: int,
  mechanism: str = "gaussian",
  neighboring="add_or_remove",
  value_discretization_interval: float = 1e-4,
  rtol: float = 2e-3,
) -> CalibrationResult:
  """Smallest noise multiplier (to ``rtol``) with PLD epsilon ``<= target``.

  Accounts ``num_steps`` Poisson-subsampled steps of ``mechanism``
  (``'gaussian'``: DP-ZO Alg. 1 line 13, App. A eq. (4), Table 16;
  ``'laplace'``: line 15, App. A "Approximate eps-DP by Laplace") with
  dp_accounting's pessimistic PLD, add/remove maximum by default: step 1
  of the module docstring on the plan these arguments describe (the full
  batch at probability 1). A mechanism calibrated through another one's
  search (the discrete ones) is calibrated on its plan by :func:`calibrate`.

  Raises:
    ValueError: on invalid input, or when no multiplier in
      ``[1e-2, 1e6]`` brackets the target (e.g. epsilon so small that even
      ``noise_multiplier = 1e6`` exceeds it).
  """
  plan = plan_lib.PrivacyPlan.build(
    mechanism=mechanism,
    noise_multiplier=1.0,
    neighboring=neighboring,
    sampling=sampling_scheme.with_probability(sampling_probability),
  )
  if not plan.is_noised:
    raise ValueError("A non-private plan has no noise to calibrate.")
  searched = plan.mechanism.calibration_value()
  if type(searched) is not type(plan.mechanism):
    raise ValueError(
      f"The {mechanism} mechanism is calibrated through the "
      f"{searched.name} mechanism's search and its own plan's epsilon: "
      "use zoprivacy.privacy.calibrate(PrivacyPlan.build(mechanism="
      f"{mechanism!r}, ...), zoprivacy.Target(epsilon, delta, num_steps))."
    )
  return noise_search.search(
    plan,
    target_epsilon=target_epsilon,
    delta=delta,
    num_steps=num_steps,
    value_discretization_interval=value_discretization_interval,
    rtol=rtol,
  )


def _calibrated_plan(plan, target, epsilon_of, rtol):
  """Steps 1 and 2 (or the search on ``epsilon_of``) for ``plan``."""
  noise_search.checked_rtol(rtol)
  if not plan.is_noised:
    raise ValueError("A non-private plan has no noise to calibrate.")
  eps, delta, steps = (
    float(target.epsilon),
    float(target.delta),
    target.num_steps,
  )
  if epsilon_of is not None:
    return _on_epsilon(plan.replace(delta=delta), eps, epsilon_of, rtol)
  start = plan.replace(mechanism=plan.mechanism.calibration_value())
  search = dict(target_epsilon=eps, delta=delta, num_steps=int(steps))
  key = dict(
    search,
    rtol=float(rtol),
    sampling_probability=float(plan.sampling_probability),
    mechanism=start.mechanism.name,
    neighboring=relations.name(plan.neighboring),
  )
  sigma = _cached_start(
    key,
    lambda: noise_search.search(start, rtol=rtol, **search).noise_multiplier,
  )
  found = _first_raise_meeting(plan, sigma, delta, eps, steps, rtol, 200)
  if found is None:
    raise ValueError(
      f"No noise multiplier up to {sigma * (1 + rtol) ** 200:.4g} "
      f"meets epsilon {eps} for {plan.describe()}."
    )
  return found


def _on_epsilon(plan, target_epsilon, epsilon_of, rtol):
  """``plan`` at the feasible end of step 1's search on
  ``epsilon_of(plan)``, from multiplier 1."""
  search = noise_search.SecantSearch(
    lambda sigma: epsilon_of(plan.replace(noise_multiplier=sigma)),
    target=target_epsilon,
    width=math.log1p(noise_search.checked_rtol(rtol)),
    slope=-1.0,
    context=f"for {plan.describe()}",
  )
  _, hi = search.run(1.0, feasible=1.0)
  return plan.replace(noise_multiplier=float(math.exp(hi[0])))


def _cached_start(inputs: dict, search: Callable[[], float]) -> float:
  """``search()``, or its stored result for the same public ``inputs``
  when ``ZOPRIVACY_CALIBRATION_CACHE_DIR`` names a folder (written
  atomically; a stale, foreign or edited entry only moves step 2's start)."""
  directory = os.environ.get(CACHE_VAR)
  if not directory:
    return search()
  key = json.dumps(
    {
      "format": CACHE_FORMAT,
      "dp_accounting": metadata.version("dp-accounting"),
      "search": "calibrate_noise_multiplier",
      **inputs,
    },
    sort_keys=True,
  )
  path = os.path.join(
    directory, hashlib.sha256(key.encode()).hexdigest() + ".json"
  )
  try:
    with open(path) as f:
      record = json.load(f)
    value = float(record["noise_multiplier"])
    if record.get("key") == key and math.isfinite(value) and value > 0:
      return value
  except (OSError, ValueError, TypeError, KeyError):
    pass
  value = float(search())
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
  with os.fdopen(fd, "w") as f:
    json.dump({"key": key, "noise_multiplier": value}, f)
  os.replace(tmp, path)  # atomic: concurrent runs never read half a file
  return value


# --------------------------------------------- step 2: the plan's own epsilon


def _first_raise_meeting(
  plan, sigma, delta, target_epsilon, num_steps, rtol, max_raises
):
  """The plan at the first multiplier of ``sigma``, ``sigma (1 + rtol)``,
  ``sigma (1 + rtol)^2``, ... (``max_raises`` of them) whose own epsilon
  meets the target, or ``None``: the same answer as trying them in turn
  (epsilon falls as the multiplier grows), found in a few evaluations (a
  mechanism accounted in RDP sits 30-40 raises above its PLD start). The
  raise is interpolated from ``log epsilon``, linear in it (secant steps,
  the first at slope -1), inside the bracket of raises known to miss and
  to meet; bisected where interpolation stalls. Every plan returned has
  had its epsilon computed and met."""
  sigmas = [sigma]
  for _ in range(max_raises - 1):
    sigmas.append(sigmas[-1] * (1.0 + rtol))
  last, plans, gaps = len(sigmas) - 1, {}, {}

  def gap(k):  # log(epsilon / target): <= 0 meets
    plans[k] = plan.replace(noise_multiplier=sigmas[k], delta=delta)
    eps = plans[k].epsilon(num_steps)
    met = eps <= target_epsilon
    gaps[k] = (
      min(math.log(eps / target_epsilon), 50.0)
      if not met
      else (math.log(max(eps, 1e-300) / target_epsilon))
    )
    return met

  if gap(0):
    return plans[0]
  lo, hi = 0, None  # lo misses, hi meets
  k = min(max(1, math.ceil(gaps[0] / math.log1p(rtol))), last)
  for tries in range(2 * max_raises):
    if gap(k):
      hi = k
    else:
      lo = k
      if k == last:
        return None
    if hi is not None and hi - lo == 1:
      return plans[hi]
    k = _next_raise(lo, hi, gaps, last, bisect=tries % 3 == 2)
  raise RuntimeError("The raise search did not converge.")  # unreachable


def _next_raise(lo, hi, gaps, last, bisect: bool) -> int:
  """The secant root from the two raises nearest it (with no raise known
  to meet, beyond ``lo``), rounded up and kept strictly inside the bracket
  (so next to an end when the root is); the midpoint every third step,
  where the secant would creep from one side."""
  if hi is None:
    a, b = sorted(gaps)[-2:]  # the two largest raises, both missing
    slope = (gaps[b] - gaps[a]) / (b - a)
    guess = b + (math.ceil(-gaps[b] / slope) if slope < 0 else b)
    return min(max(guess, lo + 1), last)
  if bisect:
    return (lo + hi) // 2
  slope = (gaps[hi] - gaps[lo]) / (hi - lo)
  guess = math.ceil(lo - gaps[lo] / slope) if slope < 0 else lo + 1
  return min(max(guess, lo + 1), hi - 1)
