"""One calibration: :func:`zoprivacy.privacy.calibrate` takes a value (or
its plan) and a target and returns the same kind, the runner, the tuner and
the audit builder call it, and no other code searches a noise multiplier
(read from the source with ``ast``)."""

import ast
import pathlib

import pytest

import zoprivacy
from configs import default, hidden_state_digits_logreg
from experiments.run import resolution, run_setup
from experiments.tuning import budget
from zoprivacy.privacy import PrivacyPlan, calibration

REPO = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = "zoprivacy/privacy/calibration/"
# The search's own names: its module, its classes and functions.
SEARCH_NAMES = {
  "noise_search",
  "SecantSearch",
  "_first_raise_meeting",
  "_on_epsilon",
  "_calibrated_plan",
  "warm_start",
  "first_point",
}
ROOT_FINDERS = {"brentq", "brenth", "bisect", "ridder", "toms748", "newton"}
ROOT_FINDERS |= {"root_scalar"}
# A function whose name says it finds a multiplier (or a sigma).
CALIBRATING = ("calibrat", "noise_multiplier", "sigma", "noise_std")
TARGET = zoprivacy.Target(epsilon=2.0, delta=1e-5, num_steps=200)


def _sources():
  for folder in ("zoprivacy", "experiments"):
    for path in sorted((REPO / folder).rglob("*.py")):
      rel = str(path.relative_to(REPO))
      if not rel.startswith(PACKAGE):
        yield rel, path.read_text()


def _search_uses(source: str):
  """``(line, name)`` of each use of the search's names: imported, called
  or read as an attribute."""
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.ImportFrom):
      names = [node.module or "", *(a.name for a in node.names)]
    elif isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.Attribute):
      names = [node.attr]
    elif isinstance(node, ast.Name):
      names = [node.id]
    else:
      continue
    for name in names:
      if name.rsplit(".", 1)[-1] in SEARCH_NAMES:
        yield node.lineno, name


def _iterates(node) -> bool:
  """A ``while`` loop, or a ``for`` over ``range`` that may stop early:
  an iteration towards something (not a walk over a list)."""
  if isinstance(node, ast.While):
    return True
  if not isinstance(node, ast.For) or not isinstance(node.iter, ast.Call):
    return False
  if getattr(node.iter.func, "id", "") != "range":
    return False
  return any(isinstance(n, ast.Break | ast.Return) for n in ast.walk(node))


def _hand_searches(source: str):
  """``(line, function)`` of each function named for a multiplier that
  iterates or calls a root finder: a search of its own."""
  for node in ast.walk(ast.parse(source)):
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
      continue
    if not any(word in node.name.lower() for word in CALIBRATING):
      continue
    for inner in ast.walk(node):
      func = inner.func if isinstance(inner, ast.Call) else None
      name = getattr(func, "attr", getattr(func, "id", ""))
      if _iterates(inner) or name in ROOT_FINDERS:
        yield node.lineno, node.name
        break


def _offenders(check, allowed=()):
  return [
    f"{rel}:{line} {what}"
    for rel, source in _sources()
    for line, what in check(source)
    if not rel.startswith(allowed)
  ]


def test_only_the_calibration_runs_the_search():
  """The search (and the starting points it asks the mechanism values
  for) is read by the calibration package only; the values state their
  start (zoprivacy/mechanisms/)."""
  assert not _offenders(_search_uses, ("zoprivacy/mechanisms/",))


def test_no_other_function_searches_a_noise_multiplier():
  assert not _offenders(_hand_searches)


@pytest.mark.parametrize(
  "source,check",
  [
    (
      "def calibrate_trial_noise(total, t):\n  hi = 1.0\n"
      "  while total(hi) > t:\n    hi *= 2\n  return hi\n",
      _hand_searches,
    ),
    (
      "from scipy import optimize\ndef sigma_for(f):\n"
      "  return optimize.brentq(f, 0.1, 10)\n",
      _hand_searches,
    ),
    (
      "def noise_multiplier(f, t):\n  for k in range(60):\n"
      "    if f(2.0**k) <= t:\n      return 2.0**k\n",
      _hand_searches,
    ),
    ("from zoprivacy.privacy.calibration import noise_search\n", _search_uses),
    ("def f(m, t):\n  return m.warm_start(t)\n", _search_uses),
  ],
)
def test_the_checks_see_a_search(source, check):
  assert list(check(source))


@pytest.mark.parametrize(
  "source",
  [
    "def pure_noise_multiplier(e, t):\n  return t / e\n",
    "def noise_multipliers(ts):\n  return [f(t) for t in sorted(ts)]\n",
    "def sigma_rows(s):\n  for t in sorted(s):\n    print(t)\n",
  ],
)
def test_a_closed_form_or_a_table_is_not_a_search(source):
  assert not list(_hand_searches(source))


# ------------------------------------------------------------ the one entry


def _value():
  return zoprivacy.Privacy(
    noise=zoprivacy.Float(),
    sampling=zoprivacy.Poisson(dataset_size=1000, expected_batch_size=50),
    target=TARGET,
  )


def _plan():
  return _value().replace(noise_multiplier=1.0).plan()


def test_a_value_and_its_plan_calibrate_to_the_same_multiplier():
  value = calibration.calibrate(_value())
  assert isinstance(value, zoprivacy.Privacy) and value.target == TARGET
  plan = value.calibrated_plan
  assert plan.epsilon(TARGET.num_steps) <= TARGET.epsilon
  again = calibration.calibrate(_plan(), TARGET)
  assert isinstance(again, PrivacyPlan) and again.delta == TARGET.delta
  assert (
    again.noise_multiplier == value.noise_multiplier == plan.noise_multiplier
  )
  # The smallest to 0.2%: 0.3% less noise misses the target.
  below = plan.replace(noise_multiplier=plan.noise_multiplier / 1.003)
  assert below.epsilon(TARGET.num_steps) > TARGET.epsilon
  assert _value().calibrate().noise_multiplier == value.noise_multiplier


def test_another_epsilon_is_met_to_its_precision():
  """``epsilon_of`` (the tuner's road): the plan's epsilon over twice the
  steps, met to 1e-6."""
  plan = _plan()

  def twice(p):
    return p.epsilon(2 * TARGET.num_steps)

  found = calibration.calibrate(plan, TARGET, epsilon_of=twice, rtol=1e-6)
  assert twice(found) <= TARGET.epsilon
  less = found.replace(noise_multiplier=found.noise_multiplier / (1 + 2e-6))
  assert twice(less) > TARGET.epsilon


@pytest.mark.parametrize(
  "args,kwargs,error,match",
  [
    ((), {}, TypeError, "takes a plan and a zoprivacy.Target"),
    ((TARGET,), {"estimator": zoprivacy.dpzero}, TypeError, "plan and a"),
    ((TARGET,), {"rtol": 0.5}, ValueError, "rtol"),
  ],
)
def test_a_plan_is_refused_without_a_target_or_with_value_arguments(
  args, kwargs, error, match
):
  with pytest.raises(error, match=match):
    calibration.calibrate(_plan(), *args, **kwargs)


def test_a_value_without_a_target_or_another_object_is_refused():
  with pytest.raises(ValueError, match="needs a target"):
    calibration.calibrate(_value().replace(target=None))
  with pytest.raises(TypeError, match="Privacy value or a"):
    calibration.calibrate(zoprivacy.dpzero, TARGET)


# ------------------------------------------- the runner, tuner, audit call it


class _Called(Exception):
  pass


@pytest.fixture
def calls(monkeypatch):
  """Every call of the one calibration, stopped there."""
  seen = []

  def recording(subject, target=None, **kwargs):
    seen.append((type(subject).__name__, target, sorted(kwargs)))
    raise _Called

  monkeypatch.setattr(calibration, "calibrate", recording)
  return seen


@pytest.mark.parametrize("module", [default, hidden_state_digits_logreg])
def test_the_runner_calls_it(calls, module):
  """The value's calibration (DPZero), and a Noisy-ZOGD setting's plan
  (built from the run's value: calibrated as the setting is built)."""
  config = module.get_config()
  config.privacy.target_epsilon = 2.0
  if "noise_std" in config.estimator_kwargs:  # the target is its noise
    config.estimator_kwargs.noise_std = None
  typed, spec = resolution.resolve(config)
  typed = typed.for_dataset(1431)
  with pytest.raises(_Called):
    kwargs = run_setup.estimator_kwargs(typed, spec=spec)
    run_setup.calibrated(typed, spec, kwargs)
  ((kind, target, _),) = calls
  assert kind == ("PrivacyPlan" if spec.takes_setting else "Privacy")
  assert target in (None, zoprivacy.Target(2.0, 1e-5, config.num_steps))


def test_the_tuner_calls_it(calls):
  """The per-trial noise of a tuning: its total over the trials, to 1e-6."""
  tuning = dict(num_steps=100, score_noise=5.0, target_epsilon=2.0)
  count = budget.trial_count("poisson", 3.0)
  with pytest.raises(_Called):
    budget.calibrate_trial_noise(_plan(), count=count, **tuning)
  assert calls == [
    ("PrivacyPlan", zoprivacy.Target(2.0, 1e-5, 100), ["epsilon_of", "rtol"])
  ]


def test_the_audit_builder_calls_it(calls):
  # Imported here: the audit builder loads JAX and every estimator.
  from zoprivacy.audit import calibrated  # pylint: disable=g-import-not-at-top

  with pytest.raises(_Called):
    calibrated.calibrated("dpzero", target_epsilon=1.0, delta=1e-5)
  assert calls == [("PrivacyPlan", zoprivacy.Target(1.0, 1e-5, 1), [])]
