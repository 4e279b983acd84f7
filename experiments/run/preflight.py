"""Every check of a run config that needs no data, before anything is built.

:func:`validate` resolves the estimator's registry declaration (the only
registry lookup of a run: everything after it receives the declaration) and
refuses, with one message each: an unknown estimator, a non-positive or
non-finite epsilon, a delta outside (0, 1), an absurd step count, a bad
batch size, clip or smoothing, unknown estimator arguments, an unknown
optimizer, an optimizer wrapper that changes what a step is
(``optax.MultiSteps``), a sampling scheme the estimator's accounting does
not cover, and a Noisy-ZOGD setting that breaks its theorem's conditions.

:func:`check_before_jax` (step counts, epsilon, delta, batch size, clip,
smoothing, learning rate, step wrappers, the workdir) imports nothing heavy:
a command line runs it before JAX loads.
Checks that need the dataset size (a batch larger than the training set, a
budget too small for the planned steps) run as soon as the data is loaded,
before the model is built.
"""

from __future__ import annotations

import difflib
import errno
import os

from experiments.run import (
  config_fields,
  optimizer_names,
  privacy_config,
  settings,
)
from experiments.run import workdir as workdir_lib
from experiments.run.config_numbers import check_numbers
from zoprivacy import estimator_manifest


def _check_privacy(config, spec) -> None:
  if not spec.private:
    return
  block = config.privacy
  if not 0.0 < (block.get("delta") or 0.0) < 1.0:
    raise ValueError(
      f"privacy.delta must lie in (0, 1), got {block.get('delta')!r}."
    )
  if (
    not spec.takes_setting
    and block.get("target_epsilon") is None
    and block.get("noise_multiplier") is None
  ):
    raise ValueError(
      "Set privacy.target_epsilon or privacy.noise_multiplier for a private "
      "run."
    )
  if block.sampling not in spec.sampling:
    schemes = " or ".join(
      "Poisson" if s == "poisson" else repr(s) for s in spec.sampling
    )
    raise ValueError(
      f"{config.estimator}'s privacy is accounted under {schemes} "
      f"sampling, not {block.sampling!r} ('shuffle' is only for the "
      "non-private baseline)."
    )
  if not spec.takes_setting:  # the value's own checks, before JAX loads
    privacy_config.value(config, 1 << 30)


def check_kwarg_names(estimator: str, kwargs, accepted) -> None:
  """Refuses keyword names the estimator's factory (or the model, for
  ``model_kwargs``) does not take, naming the closest accepted one (or the
  privacy field a privacy setting of earlier releases moved to)."""
  unknown = [k for k in kwargs if k not in accepted]
  if unknown:
    hints = []
    for k in unknown:
      moved = privacy_config.moved_hint(f"estimator_kwargs.{k}")
      if "privacy" in accepted and moved:
        hints.append(moved)
        continue
      names = {name: name for name in accepted}
      if "privacy" in accepted:  # a misspelt privacy field: the block's
        names.update({f: f"privacy.{f}" for f in privacy_config.MOVED_KWARGS})
      close = difflib.get_close_matches(str(k), list(names), n=1)
      hints.append(
        repr(k) + (f" (did you mean {names[close[0]]!r}?)" if close else "")
      )
    raise ValueError(
      f"{estimator} does not take {', '.join(hints)}; "
      f"it takes {', '.join(sorted(a for a in accepted if a != 'privacy'))}."
    )


def check_required(estimator: str, kwargs, required) -> None:
  """Refuses ``estimator_kwargs`` that lack a hyperparameter the estimator
  has no default for (GEP's ``num_bases``), naming the override."""
  missing = [k for k in required if k not in kwargs]
  if missing:
    flags = " ".join(f"--config.estimator_kwargs.{k}=<value>" for k in missing)
    raise ValueError(
      f"{estimator} needs {', '.join(missing)} (no default): set "
      f"estimator_kwargs.{missing[0]}, e.g. {flags}."
    )


# Named in the message for an unknown optimizer.
def check_declared(config, declaration, kwargs) -> None:
  """:func:`validate`'s checks of the estimator's declaration, run on its
  JAX-free :class:`~zoprivacy.estimator_manifest.Declaration` before JAX
  loads: :func:`check_spec`, keyword names (``kwargs``: the
  ``estimator_kwargs`` the run will have) and the optimizer's name (when
  the installed optax is the one the manifest lists). A setting-taking
  estimator's own checks run later, in :func:`validate`."""
  check_spec(config, declaration)
  if declaration.takes_setting:
    return
  merged = {**dict(declaration.defaults), **kwargs}
  check_kwarg_names(config.estimator, merged, declaration.parameters)
  check_required(config.estimator, merged, declaration.required)
  names = estimator_manifest.optax_names()
  if names is not None and config.get("optimizer") not in names[1]:
    raise optimizer_names.unknown_optimizer(config.get("optimizer"), names[0])


class BudgetBelowTargetError(ValueError):
  """``target_epsilon`` above ``epsilon_budget``: refused before anything
  is built (the calibrated run would spend the target)."""


def check_budget_against_target(config, private: bool) -> None:
  """A run calibrated for ``target_epsilon`` spends it over its planned
  steps, so a smaller ``epsilon_budget`` refuses it; found from the two
  numbers alone (no accounting), before JAX loads."""
  block = config.privacy
  budget, target = config.get("epsilon_budget"), block.get("target_epsilon")
  if not private or budget is None or target is None:
    return
  if block.get("noise_multiplier") is not None or not target > budget:
    return  # a set multiplier wins over the target: the ledger checks it
  raise BudgetBelowTargetError(
    f"privacy.target_epsilon={target:g} is above epsilon_budget={budget:g}: the "
    f"noise is calibrated to spend epsilon {target:g} over the "
    f"{_planned(config)}, which the budget refuses. Set "
    f"privacy.target_epsilon to at most {budget:g} (more noise), or raise "
    "epsilon_budget."
  )


def _planned(config) -> str:
  """``4000 planned steps`` or ``steps of 3 planned epochs``."""
  if config.get("num_epochs") is not None:
    return f"steps of {config.num_epochs:g} planned epochs"
  return f"{config.num_steps} planned steps"


def _check_run_settings(config, declaration) -> None:
  """An estimator that runs only under its declared settings (a task
  whose loss declares what its analysis assumes, its own sampling) names
  them all when the config lacks them."""
  settings = dict(declaration.run_settings)
  if not settings:
    return
  sampling = config.privacy.get("sampling")
  if all(_has(config, k) for k in settings):
    if sampling in declaration.sampling:
      return
    raise ValueError(
      f"{config.estimator} is analysed under the sampling "
      f"{' or '.join(map(repr, declaration.sampling))}, not {sampling!r}: "
      f"set --config.privacy.sampling={settings.get('privacy.sampling')}."
    )
  shown = " ".join(f"--config.{k}={v}" for k, v in settings.items())
  raise ValueError(
    f"{config.estimator} runs under its declared settings "
    + ", ".join(f"{k}={v!r}" for k, v in settings.items())
    + f" (the config lacks some of them); add {shown}."
  )


def _has(config, dotted: str) -> bool:
  """Whether ``config`` has the (dotted) field."""
  node = config
  for key in dotted.split("."):
    if not hasattr(node, "keys") or key not in node:
      return False
    node = node[key]
  return True


def check_spec(config, spec) -> None:
  """What the estimator's declaration (``spec``: the manifest's, or the
  live registry's) says of the whole config: its run settings, privacy
  settings and sampling, the public split it needs, a budget below the
  target, and a learning rate (set, or registered)."""

  _check_run_settings(config, spec)
  _check_privacy(config, spec)
  config_fields.check_public(config, config.estimator, spec.public_data)
  check_budget_against_target(config, spec.private)
  if (
    config.get("learning_rate") is None
    and spec.learning_rate is None
    and not spec.takes_setting
  ):
    raise ValueError(
      f"Set learning_rate: {config.estimator} registers no default "
      "learning rate."
    )


def _check_estimator_kwargs(config, spec) -> None:
  """The names :func:`experiments.run.run_setup.estimator_kwargs` will pass,
  read from the declaration (nothing is built)."""
  if not spec.takes_setting:  # a setting is checked by its preflight
    merged = {**dict(spec.defaults), **dict(config.estimator_kwargs)}
    check_kwarg_names(config.estimator, merged, spec.parameters)
    check_required(config.estimator, merged, spec.required)


def _check_optimizer(config, spec) -> None:
  # Imported on use: optax loads JAX, kept out of the start-up check.
  from experiments.run.optimizers import check_optimizer  # pylint: disable=g-import-not-at-top

  if not spec.takes_setting:  # names and signatures, none built
    check_optimizer(
      settings.Settings.from_config(config).with_learning_rate(spec)
    )


def validate(config):
  """The run's :class:`~zoprivacy.estimators.registry.EstimatorSpec`, after
  every check that needs no data. Pure: it reads the declaration and the
  signatures, and builds no estimator, optimizer or JAX value."""
  # Imported on use: the hidden-state setting and the registry load JAX,
  # kept out of the start-up check.
  from experiments.run import hidden_state_run  # pylint: disable=g-import-not-at-top
  from zoprivacy.estimators import registry  # pylint: disable=g-import-not-at-top

  check_numbers(config)
  spec = registry.get(config.estimator)  # a typo lists the choices
  # The command line checks this before JAX loads; a config built in
  # Python (train.train(config)) is checked here: a field no part of the
  # run reads (config.target_epsilon of earlier releases) is refused, not
  # ignored. (A task put into the task table by hand, not registered,
  # declares no fields: its build names an unknown dataset.)
  declared = config.get("dataset") in config_fields.task_fields()
  if declared and config_fields.unknown_fields(config, spec.config_fields):
    # The other estimators' fields only name who reads a wrong field.
    config_fields.check(
      config,
      spec.config_fields,
      {n: registry.get(n).config_fields for n in registry.names()},
    )
  check_spec(config, spec)
  _check_estimator_kwargs(config, spec)
  _check_optimizer(config, spec)
  if spec.takes_setting:
    typed = settings.Settings.from_config(config).with_learning_rate(spec)
    hidden_state_run.preflight(typed, spec=spec)
  return spec


def check_workdir(config) -> None:
  """The workdir is (or can be made) a writable folder that is the run's
  own (:func:`experiments.run.workdir.check_own`; no JAX needed)."""
  workdir = config.get("workdir")
  if not workdir:
    return
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise ValueError(
      f"workdir {workdir!r} is a file, not a folder; choose another workdir."
    )
  workdir_lib.check_own(workdir)  # another program's folder: refused
  os.makedirs(workdir, exist_ok=True)  # OSError: a file on its path, ...
  if not os.access(workdir, os.W_OK | os.X_OK):
    raise PermissionError(
      errno.EACCES, f"cannot write to the workdir {workdir!r}", workdir
    )


def check_before_jax(config) -> None:
  """What a command line checks before JAX loads: the numbers, step
  wrappers and the workdir."""
  check_numbers(config)
  check_workdir(config)
