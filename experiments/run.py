r"""Main entry point: ``python -m experiments.run --config configs/<name>.py``.

Override any field with ``--config.<field>=<value>``, e.g.

  python -m experiments.run --config configs/default.py \
      --config.target_epsilon=4 --config.num_steps=2000
  python -m experiments.run --config configs/default.py \
      --config.noise_multiplier=3.0 --config.target_epsilon=None
  python -m experiments.run --config configs/default.py \
      --config.estimator=mezo --config.optimizer=adamw
  python -m experiments.run --config configs/fashion_mnist_pazo_public4.py \
      --config.estimator=pazo_m --config.estimator_kwargs.alpha=0.5

``--config.<field>=None`` unsets a field. ``--config.estimator_kwargs.<k>``
may name any hyperparameter of the estimator; switching ``--config.estimator``
drops the previous estimator's hyperparameters that the new one does not
take (and says so) and fills in the new one's registered defaults.
``--resume=force`` resumes a workdir written by a different config.
User errors print one paragraph; ``--debug`` shows the traceback.
"""

import ast
import inspect
import sys

from absl import app, logging
from ml_collections import config_flags

CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Path to a configs/<name>.py file.", lock_config=True
)

_OWN_FLAGS = {"debug": False, "resume": ""}
_ESTIMATOR_SWITCHED = False
_LATE = {"none": [], "estimator_kwargs": {}}


def _literal(text: str):
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def split_argv(argv):
  """Takes out what absl's config flags cannot parse; applied after parsing."""
  kept = []
  for arg in argv:
    name, _, value = arg.partition("=")
    if name == "--debug":
      _OWN_FLAGS["debug"] = True
    elif name == "--resume":
      _OWN_FLAGS["resume"] = value
    elif name.startswith("--config.estimator_kwargs."):
      _LATE["estimator_kwargs"][name.split(".", 2)[2]] = _literal(value)
    elif name.startswith("--config.") and value == "None":
      _LATE["none"].append(name[len("--config.") :])
    else:
      kept.append(arg)
  return kept


def apply_late_overrides(config, argv_had_estimator: bool):
  from zoprivacy.estimators import registry  # pylint: disable=g-import-not-at-top

  for field in _LATE["none"]:
    if field not in config:
      raise ValueError(f"Unknown config field {field!r}.")
    with config.unlocked():
      setattr(config, field, None)
  spec = registry.get(config.estimator)
  accepted = inspect.signature(spec.factory).parameters
  with config.unlocked():
    if argv_had_estimator:
      dropped = [k for k in config.estimator_kwargs if k not in accepted]
      with config.estimator_kwargs.unlocked():
        for k in dropped:
          del config.estimator_kwargs[k]
      if dropped:
        print(
          f"note: {config.estimator} does not take {', '.join(dropped)} "
          "from the config's previous estimator; dropped."
        )
    with config.estimator_kwargs.unlocked():
      for k, v in _LATE["estimator_kwargs"].items():
        config.estimator_kwargs[k] = v
    if _OWN_FLAGS["resume"]:
      config.resume = _OWN_FLAGS["resume"]
  return config


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  logging.set_verbosity(logging.WARNING)
  from experiments import (
    errors,  # pylint: disable=g-import-not-at-top
    report,  # pylint: disable=g-import-not-at-top
    train,  # pylint: disable=g-import-not-at-top
  )

  try:
    config = apply_late_overrides(CONFIG.value, _ESTIMATOR_SWITCHED)
    result = train.train(config)
  except errors.USER_ERRORS as e:
    if _OWN_FLAGS["debug"]:
      raise
    print(errors.one_paragraph(e), file=sys.stderr)
    sys.exit(2)
  print(report.format_report(result))


if __name__ == "__main__":
  _ESTIMATOR_SWITCHED = any(
    a.startswith("--config.estimator=") for a in sys.argv
  )
  sys.argv = split_argv(sys.argv)
  try:
    app.run(main)
  except AttributeError as e:  # a --config.<field> that the config lacks
    if _OWN_FLAGS["debug"]:
      raise
    print(
      f"error: unknown config field in the overrides: {e}\n(run with "
      "--debug for the traceback)",
      file=sys.stderr,
    )
    sys.exit(2)
