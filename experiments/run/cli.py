r"""The command line of ``python -m experiments.run --config configs/<name>.py``.

Override any field with ``--config.<field>=<value>``, e.g.

  python -m experiments.run --config configs/default.py \
      --config.privacy.target_epsilon=4 --config.num_steps=2000
  python -m experiments.run --config configs/default.py \
      --config.privacy.noise_multiplier=3.0 \
      --config.privacy.target_epsilon=None
  python -m experiments.run --config configs/default.py \
      --config.estimator=mezo --config.optimizer=adamw
  python -m experiments.run --config configs/fashion_mnist_pazo_public4.py \
      --config.estimator=pazo_m --config.estimator_kwargs.alpha=0.5

Flags are parsed by absl (``--config`` and its ``--config.<field>``
overrides by ml_collections' ``config_flags``; ``--resume``, ``--debug``).
Two forms that ``config_flags`` cannot parse are taken out first and
applied after parsing: ``--config.<field>=None`` (unsets a field; its typed
parser would reject ``None``) and ``--config.estimator_kwargs.<k>=<v>``
(the keys an estimator takes depend on the estimator, which the same command
line may switch).

Switching ``--config.estimator`` resets ``estimator_kwargs`` to the new
estimator's registered defaults, except the ``--config.estimator_kwargs.*``
given on the command line, and ``privacy.clip`` (in the estimator's own
units) to the new estimator's default unless the command line sets it; the config's values for hyperparameters the new
estimator takes but has no default for are carried over, and the note and
the report name them. ``--resume=force`` resumes a workdir written by a
different config. User errors print one paragraph, no traceback
(``--debug`` shows it); Ctrl-C says at which step to resume.
"""

import ast
import re
import sys

import ml_collections
from absl import flags, logging
from ml_collections import config_flags

from experiments.run import (
  caches,
  config_defaults,
  config_fields,
  errors,
  estimator_switch,
  preflight,
  privacy_config,
  progress,
)
from zoprivacy import estimator_manifest

CONFIG = config_flags.DEFINE_config_file(
  "config", None, "Path to a configs/<name>.py file.", lock_config=True
)
# The fields of configs/default.py the config file leaves out (filled).
FILLED: list[str] = []


class _CompletingParser(type(flags.FLAGS["config"].parser)):
  """Loads the config file and gives it ``configs/default.py``'s values for
  the fields it leaves out (:mod:`experiments.run.config_defaults`) before
  the ``--config.<field>`` overrides apply: any field of the schema can be
  overridden, whatever the file sets."""

  def parse(self, path):
    config = super().parse(path)
    if isinstance(config, dict | ml_collections.ConfigDict):
      config, FILLED[:] = config_defaults.complete(config)
      config.lock()
    return config


flags.FLAGS["config"].parser = _CompletingParser("config", lock_config=False)
DEBUG = flags.DEFINE_bool("debug", False, "Show the traceback of user errors.")
RESUME = flags.DEFINE_string(
  "resume", "", "'force': resume a workdir written by a different config."
)

_LATE = {
  "none": [],
  "estimator_kwargs": {},
  "fields": {},
  "estimator": None,  # --config.estimator's value, applied late
  "switched": False,  # set when that value differs from the config file's
}
USAGE = (
  "usage: python -m experiments.run --config configs/<name>.py "
  "[--config.<field>=<value> ...] [--resume=force] [--debug]"
)


def _literal(text: str):
  if text.strip().lower() in ("nan", "inf", "+inf", "-inf"):
    return float(text)  # as config_flags reads a float field's value
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def _outside_schema(name: str) -> bool:
  """``--config.<field>...`` whose field is not in the default schema: a
  field the task or the estimator declares (``--config.public=...``), which
  the config file need not set; :mod:`experiments.run.config_fields` decides."""

  top = name[len("--config.") :].split(".")[0]
  return top not in config_fields.default_schema()


def split_argv(argv):
  """Takes out the overrides ``config_flags`` cannot parse (see above);
  :func:`apply_late_overrides` applies them after parsing."""
  kept = []
  for arg in argv:
    name, sep, value = arg.partition("=")
    if name == "--config.estimator" and sep and value != "None":
      _LATE["estimator"] = value  # a switch only if the file names another
    elif name.startswith("--config.estimator_kwargs."):
      _LATE["estimator_kwargs"][name.split(".", 2)[2]] = _literal(value)
    elif name.startswith("--config.") and value == "None":
      _LATE["none"].append(name[len("--config.") :])
    elif name.startswith("--config.") and sep and _outside_schema(name):
      _LATE["fields"][name[len("--config.") :]] = value
    else:
      kept.append(arg)
  return kept


def _coerce(old, text: str, path: str):
  """``text`` as the type of the config's value ``old`` (a literal when
  the config has none)."""
  if isinstance(old, str):
    return text
  value = _literal(text)
  if isinstance(old, bool) and text.lower() in ("true", "false"):
    return text.lower() == "true"
  if old is None or type(value) is type(old):
    return value
  if isinstance(old, float) and isinstance(value, int):
    return float(value)
  raise ValueError(
    f"--config.{path}={text} does not match the type of the config's value "
    f"{old!r} ({type(old).__name__})."
  )


def _apply_fields(config) -> None:
  """``--config.<field>=<value>`` for fields outside the default schema,
  added when the config lacks them (checked afterwards)."""
  for path, text in _LATE["fields"].items():
    *blocks, leaf = path.split(".")
    node = config
    for block in blocks:
      if block not in node:
        with node.unlocked():
          node[block] = ml_collections.ConfigDict()
      node = node[block]
    with node.unlocked():
      node[leaf] = _coerce(node.get(leaf), text, path)


def check_declared(config) -> None:
  """The checks that need the estimator's declaration, on the JAX-free
  manifest, with the ``estimator_kwargs`` a switch will give."""
  declaration = estimator_manifest.get(config.estimator)
  every = estimator_manifest.declarations().values()
  config_fields.check(config, declaration.config_fields, _fields_of(every))
  kwargs = dict(config.estimator_kwargs)
  if _LATE["switched"]:  # set by _apply_taken_out, which runs first
    kwargs, _ = estimator_switch.switched_kwargs(
      kwargs,
      declaration.parameters,
      dict(declaration.defaults),
      dict(_LATE["estimator_kwargs"]),
    )
    # As the run will hold them: in a ConfigDict (which orders its keys).
    kwargs = dict(ml_collections.ConfigDict(kwargs))
  preflight.check_declared(config, declaration, kwargs)


def _fields_of(declarations) -> dict:
  """``{estimator: its config_fields}`` (named in an unknown field's
  message)."""
  return {d.name: d.config_fields for d in declarations}


def one_length(config, argv) -> None:
  """A length given on the command line ``argv`` (``--config.num_epochs=3``)
  replaces the config file's other one (its ``num_steps``); both given
  there are left to :func:`experiments.run.run_length.check` to refuse."""
  given = {a.split("=")[0].removeprefix("--config.") for a in argv}
  for name, other in (("num_epochs", "num_steps"), ("num_steps", "num_epochs")):
    if name in given and other not in given and config.get(name) is not None:
      if config.get(other) is not None:
        with config.unlocked():
          config[other] = None


def _apply_taken_out(config):
  """``--config.<field>=None``, ``--config.estimator_kwargs.<k>=<v>``,
  fields outside the default schema, ``--config.estimator`` and
  ``--resume``: no estimator lookup (no JAX) needed. Naming the estimator
  the config file already has is no switch: its ``estimator_kwargs`` stay."""
  _apply_fields(config)
  one_length(config, sys.argv)
  estimator = _LATE["estimator"]
  if estimator is not None and config.get("estimator") != estimator:
    _LATE["switched"] = True
    with config.unlocked():
      config.estimator = estimator
  for field in _LATE["none"]:
    *blocks, leaf = field.split(".")
    node = config
    for block in blocks:
      node = node.get(block) if hasattr(node, "get") else None
    if node is None or leaf not in node:
      moved = privacy_config.moved_hint(field)
      raise ValueError(f"Unknown config field {moved or repr(field)}.")
    with node.unlocked():
      setattr(node, leaf, None)
  with config.unlocked(), config.estimator_kwargs.unlocked():
    try:
      config.estimator_kwargs.update(_LATE["estimator_kwargs"])
    except TypeError as e:  # a value the field's type cannot take
      raise ValueError(f"--config.estimator_kwargs: {e}.") from e
    if flags.FLAGS.is_parsed() and RESUME.value:
      config.resume = RESUME.value
  return config


def apply_late_overrides(config, argv_had_estimator: bool | None = None):
  """Applies the taken-out overrides and the estimator switch; returns the
  config. The carried-over names are in :data:`CARRIED`."""
  # Imported on use: the registry loads the estimators and JAX, which the
  # command line's checks before this keep out of its start-up.
  from zoprivacy.estimators import registry  # pylint: disable=g-import-not-at-top

  _apply_taken_out(config)
  switched = (
    _LATE["switched"] if argv_had_estimator is None else argv_had_estimator
  )
  if switched:
    spec = registry.get(config.estimator)
    given = dict(_LATE["estimator_kwargs"])
    changes = estimator_switch.switch_estimator_kwargs(config, spec, given)
    CARRIED[:] = changes["carried over"]
    notes = [f"{k}: {', '.join(v)}" for k, v in changes.items() if v]
    if config.get("learning_rate") is None and spec.learning_rate is not None:
      notes.append(
        f"learning_rate: {spec.learning_rate:g}, {spec.name}'s registered "
        "default (--config.learning_rate sets another)"
      )
    if notes:
      print(
        f"note: estimator_kwargs for {config.estimator}: " + "; ".join(notes)
      )
  return config


CARRIED: list[str] = []


def _check_live(config) -> None:
  """:func:`check_declared`'s field check on the live registry (the run's
  own checks do the rest)."""
  # Imported on use: the live registry loads JAX (see apply_late_overrides).
  from zoprivacy.estimators import registry  # pylint: disable=g-import-not-at-top

  spec = registry.get(config.estimator)
  specs = [registry.get(n) for n in registry.names()]
  config_fields.check(config, spec.config_fields, _fields_of(specs))


def _fail(message: str, debug: bool, error=None) -> int:
  progress.close()
  if debug and error is not None:
    raise error
  hint = "(run with --debug for the traceback)"
  if error is not None and hint not in message:
    message += "\n" + hint
  print(message, file=sys.stderr)
  return 2


def _unknown_override(text: str, argv) -> str:
  """One line for a ``--config.a.b=...`` whose last field the config lacks
  (ml_collections names only that field): the whole flag, and its close
  name if ml_collections found one."""
  text = text.replace("\\n", " ").replace("\\'", "").strip("\"' ")
  field = text.split()[0] if text else ""
  flags_given = [a.split("=")[0].removeprefix("--") for a in argv[1:]]
  named = [f for f in flags_given if f.endswith(f".{field}")]
  close = re.search(r'Did you mean "([^"]+)"', text)
  if not (named and close):
    return f"error: unknown config field in the overrides: {text}"
  parent = named[0][: -len(field)]
  return (
    f"error: unknown config field in the overrides: {named[0]} (did you "
    f"mean {parent}{close.group(1)}?)."
  )


def parse(argv) -> int | None:
  """Parses ``argv`` with absl; a usage error is one paragraph (returns 2)."""
  debug = "--debug" in argv
  if any(a in ("-h", "--help", "--helpshort") for a in argv[1:]):
    print(__doc__)
    return 0
  try:
    rest = flags.FLAGS(argv)
    if CONFIG.value is None:  # reading it loads the file
      return _fail(f"error: no --config given.\n{USAGE}", debug)
    if len(rest) > 1:
      return _fail(f"error: unexpected arguments {rest[1:]}.\n{USAGE}", debug)
    CONFIG.value.keys()  # a file that failed to load raises here
  except AttributeError as e:  # a --config.<field> that the config lacks
    return _fail(_unknown_override(str(e), argv), debug, e)
  except Exception as e:  # pylint: disable=broad-except
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    first = lines[-1] if "Errno" in str(e) else (lines or [""])[0]
    what = type(e).__name__
    return _fail(
      f"error ({what}): cannot read the config: {first}\n{USAGE}", debug, e
    )
  return None


def main(argv=None) -> int:
  argv = split_argv(list(sys.argv if argv is None else argv))
  sys.argv = argv  # config_flags finds its overrides in sys.argv
  code = parse(argv)
  if code is not None:
    return code
  logging.set_verbosity(logging.WARNING)
  FILLED[:] = config_defaults.not_overridden(FILLED, sys.argv[1:])
  note = config_defaults.note(CONFIG.value, FILLED)
  if note:  # the run's first line: what the file leaves to the default
    print(note)
  _open_progress(CONFIG.value)

  live = "zoprivacy.estimators.registry" in sys.modules
  try:  # the numbers, then the declaration's checks, before JAX loads
    preflight.check_before_jax(_apply_taken_out(CONFIG.value))
    if not live:
      # Not when a config imported a module registering its own estimator
      # (not in the manifest): the live registry decides then.
      check_declared(CONFIG.value)
  except (ValueError, KeyError, OSError) as e:
    return _fail(errors.one_paragraph(e), DEBUG.value, e)
  try:
    result = _train(live)
  except errors.RunInterrupted as e:  # on its own line, never in the bar
    if DEBUG.value:
      raise
    import tqdm  # pylint: disable=g-import-not-at-top

    progress.close()
    tqdm.tqdm.write(str(e), file=sys.stderr)
    return 2
  except errors.user_errors() as e:
    return _fail(errors.one_paragraph(e), DEBUG.value, e)
  except KeyboardInterrupt as e:
    message = "interrupted before the first step; rerun the same command."
    return _fail(message, DEBUG.value, e)
  finally:
    progress.close()
  if CARRIED:
    result["estimator_kwargs_carried_over"] = list(CARRIED)
  # The report's module is read only now: nothing of it is needed before.
  from experiments.run import report  # pylint: disable=g-import-not-at-top

  print(report.format_report(result))
  return 0


def _open_progress(config) -> None:
  """The progress bar, on a terminal, as soon as the config is read."""
  progress.start(_LATE["estimator"] or config.estimator, config.num_steps)
  progress.stage("checking the config")


def _train(live: bool):
  """Loads JAX (only once the checks have passed) and trains, with the
  caches in the user's cache folder (:mod:`experiments.run.caches`)."""
  progress.stage("loading JAX")
  # JAX loads here, only once the checks before have passed.
  from experiments.run import train  # pylint: disable=g-import-not-at-top

  caches.use_compilation_cache()  # before anything is compiled
  caches.use_calibration_cache()
  config = apply_late_overrides(CONFIG.value)
  if live:
    _check_live(config)
  return train.train(config, defaults_filled=list(FILLED))
