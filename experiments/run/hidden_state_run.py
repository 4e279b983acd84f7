"""The runner's hooks for estimators declared ``takes_setting`` (Noisy-ZOGD).

The estimator's registry declaration
(:class:`zoprivacy.estimators.registry.EstimatorSpec`) says its factory
takes a :class:`~zoprivacy.hidden_state.NoisyZOGDSetting`; this module
builds it from the config. Everything else (the privacy plan in the state,
the ledger, calibration, result.json) follows the runner's ordinary path.

* :func:`preflight` checks the hyperparameters against Thm 3.2 from the
  config alone, before any data is loaded: ``d >= 2K``, ``R > 0``, the
  directional fraction in [0, 1], the step size limit and the declared loss
  assumptions (the clip must cover the Lipschitz constant).
* :func:`factory_kwargs` gives the factory its setting once the dataset
  size is known.
* :func:`published_outputs` lists what the run publishes from intermediate
  iterates; :func:`experiments.run.final_iterate.final_iterate` refuses the
  final-iterate epsilon when the list is not empty, and computes it from
  the ledger's record of the setting otherwise (``docs/hidden_state.md``).

Config fields: ``estimator_kwargs`` (``num_directions``, ``noise_std``,
``smoothing``, ``directional_fraction``; defaults from the registry; any
other key goes to the factory), ``privacy`` (``clip``, the ``Delta`` of the
setting, default 2.0; ``sampling``, 'full_batch' or 'without_replacement'
with ``expected_batch_size`` as the batch size; ``delta``; the noise
multiplier or target epsilon), ``learning_rate`` (the step size ``eta``;
``None``: the theorem's limit, ``K/M`` for a strongly convex loss),
``radius``, ``l2`` and ``hidden_state`` (``report``,
``checkpoints_private``).
"""

from __future__ import annotations

from typing import Any

from experiments.run import privacy_config
from experiments.tasks import logreg
from zoprivacy.hidden_state import setting as setting_lib

SAMPLING = ("full_batch", "without_replacement")
SETTING_FIELDS = (
  "num_directions",
  "noise_std",
  "clip",
  "smoothing",
  "directional_fraction",
)
# The setting's fields the privacy block holds (never estimator_kwargs).
SETTING_PRIVACY = ("clip",)


def _kwargs(config, spec) -> dict[str, Any]:
  """The setting's hyperparameters: the registered defaults, the
  ``estimator_kwargs`` and the privacy block's clip (``Delta``)."""
  kw = dict(spec.defaults)
  kw.update(config.estimator_kwargs)
  if config.privacy.get("clip") is not None:
    kw["clip"] = config.privacy.clip
  return kw


def _hidden(config):
  return config.get("hidden_state") or {}


def _assumptions(config, spec) -> setting_lib.LossAssumptions:
  if config.dataset not in ("digits_logreg", "fashion_mnist_logreg"):
    raise ValueError(
      f"Noisy-ZOGD's final-iterate epsilon needs declared loss assumptions; "
      f"the task {config.dataset!r} declares none. Use digits_logreg or "
      "fashion_mnist_logreg, or set hidden_state.report=False."
    )
  return logreg.assumptions(
    config.l2, config.radius, _kwargs(config, spec)["smoothing"]
  )


def _dataset(config) -> str:
  return config.dataset.removesuffix("_logreg")


def make_setting(
  config, dataset_size: int, *, spec
) -> setting_lib.NoisyZOGDSetting:
  kw = _kwargs(config, spec)
  fraction = kw.pop("directional_fraction", 0.5)
  if isinstance(fraction, list):
    fraction = tuple(fraction)
  report = _hidden(config).get("report", True)
  assumptions = _assumptions(config, spec) if report else None
  k = kw["num_directions"]
  eta = config.get("learning_rate")
  if eta is None:
    if assumptions is None:
      raise ValueError("Set learning_rate (the step size eta).")
    eta = setting_lib.step_size_limit(assumptions, k)
  block = config.privacy
  if block.sampling not in SAMPLING:
    raise ValueError(
      f"Noisy-ZOGD samples {SAMPLING}, got privacy.sampling={block.sampling!r}."
    )
  batch = (
    None if block.sampling == "full_batch" else int(block.expected_batch_size)
  )
  return setting_lib.NoisyZOGDSetting(
    dimension=logreg.dimension(_dataset(config)),
    dataset_size=dataset_size,
    num_directions=k,
    step_size=float(eta),
    noise_std=kw["noise_std"],
    clip=kw["clip"],
    radius=config.radius,
    smoothing=kw["smoothing"],
    directional_fraction=fraction,
    batch_size=batch,
    assumptions=assumptions,
  )


def preflight(config, *, spec) -> None:
  """Every check that needs no data (a stand-in dataset size is used)."""
  moved = [k for k in config.estimator_kwargs if k in SETTING_PRIVACY]
  if moved:
    raise ValueError(
      f"{spec.name} does not take "
      + ", ".join(
        privacy_config.moved_hint(f"estimator_kwargs.{k}") for k in moved
      )
      + ": its setting's clip is the privacy block's."
    )
  block = config.privacy
  stand_in = (
    1 if block.sampling == "full_batch" else int(block.expected_batch_size)
  )
  make_setting(config, stand_in, spec=spec)


def factory_kwargs(config, dataset_size: int, *, spec) -> dict[str, Any]:
  """The factory's ``setting=`` and the non-setting ``estimator_kwargs``."""
  kw = _kwargs(config, spec)
  extra = {k: v for k, v in kw.items() if k not in SETTING_FIELDS}
  return dict(extra, setting=make_setting(config, dataset_size, spec=spec))


def published_outputs(config, history=()) -> list[str]:
  """Outputs computed from intermediate iterates that the run publishes
  (``config``'s), or that an earlier attempt published (``history``: the
  run's metrics rows, kept across resumes)."""
  out = []
  every, steps = config.get("eval_every") or 0, config.num_steps
  earlier = sorted({r["step"] for r in history if 0 < r["step"] < steps})
  if earlier and not (every and every < steps):
    out.append(
      f"test accuracy of intermediate iterates (steps {earlier[0]}.."
      f"{earlier[-1]}, evaluated before a resume)"
    )
  if every and every < steps:
    out.append(
      f"test accuracy of intermediate iterates (eval_every={every},"
      " also shown in the progress bar)"
    )
  ckpt = config.get("checkpoint_every") or 0
  if (
    config.get("workdir")
    and ckpt
    and ckpt < steps
    and not (_hidden(config).get("checkpoints_private", False))
  ):
    out.append(
      f"intermediate checkpoints (checkpoint_every={ckpt}) not "
      "declared private (hidden_state.checkpoints_private)"
    )
  for name in ("trajectory_log", "log_trajectory"):
    if config.get(name):
      out.append(f"the trajectory log ({name}) publishes intermediate iterates")
  return out


def wants_report(config) -> bool:
  """Whether the run asks for the final-iterate report (default: yes)."""
  return bool(_hidden(config).get("report", True))
