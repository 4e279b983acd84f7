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
  iterates; :func:`final_iterate` refuses the final-iterate epsilon when the
  list is not empty (``docs/hidden_state.md``).

Config fields: ``estimator_kwargs`` (``num_directions``, ``noise_std``,
``clip``, ``smoothing``, ``directional_fraction``; defaults from the
registry; any other key goes to the factory), ``learning_rate`` (the
step size ``eta``; ``None``: the theorem's limit, ``K/M`` for a strongly
convex loss), ``radius``, ``l2``, ``sampling`` ('full_batch' or
'without_replacement' with ``expected_batch_size`` as the batch size) and
``hidden_state`` (``report``, ``checkpoints_private``).
"""

from __future__ import annotations

from typing import Any

from experiments.run import logreg_constants as logreg
from zoprivacy.hidden_state import privacy as privacy_lib
from zoprivacy.hidden_state import setting as setting_lib

SAMPLING = ("full_batch", "without_replacement")
SETTING_FIELDS = (
  "num_directions",
  "noise_std",
  "clip",
  "smoothing",
  "directional_fraction",
)


def _kwargs(config, spec) -> dict[str, Any]:
  kw = dict(spec.defaults)
  kw.update(config.estimator_kwargs)
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
  if config.sampling not in SAMPLING:
    raise ValueError(
      f"Noisy-ZOGD samples {SAMPLING}, got sampling={config.sampling!r}."
    )
  batch = (
    None if config.sampling == "full_batch" else int(config.expected_batch_size)
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
  stand_in = (
    1 if config.sampling == "full_batch" else int(config.expected_batch_size)
  )
  make_setting(config, stand_in, spec=spec)


def factory_kwargs(config, dataset_size: int, *, spec) -> dict[str, Any]:
  """The factory's ``setting=`` and the non-setting ``estimator_kwargs``."""
  kw = _kwargs(config, spec)
  extra = {k: v for k, v in kw.items() if k not in SETTING_FIELDS}
  return dict(extra, setting=make_setting(config, dataset_size, spec=spec))


def run_setting(
  config, dataset_size: int, noise_multiplier: float, *, spec
) -> setting_lib.NoisyZOGDSetting:
  """The setting the run used: its ``sigma`` gives the plan's multiplier
  (set, calibrated or from ``noise_std``)."""
  return privacy_lib.with_plan_multiplier(
    make_setting(config, dataset_size, spec=spec), noise_multiplier
  )


def published_outputs(config) -> list[str]:
  """Outputs computed from intermediate iterates that the run publishes."""
  out = []
  every, steps = config.get("eval_every") or 0, config.num_steps
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


def final_iterate(config, setting, num_steps: int) -> dict[str, Any]:
  """The three epsilons of the run, or why they are refused."""
  published = published_outputs(config)
  if published:
    return {
      "refused": "the final-iterate (hidden-state) epsilon does not "
      "apply: intermediate outputs are published: " + "; ".join(published)
    }
  report = privacy_lib.final_iterate(setting, num_steps, config.delta)
  out = report.to_dict()
  out["text"] = report.format()
  if not setting.full_batch:
    out["text"] += (
      "\n  (the ledger charges each mini-batch step as a "
      "full-batch release, without amplification by sampling; "
      "the composition figure above is amplified, WBK'19)"
    )
  out["condition_ratio"] = setting.assumptions.condition_ratio
  return out


def format_final_iterate(block: dict[str, Any]) -> str:
  if "refused" in block:
    return "final-iterate epsilon: not reported (" + block["refused"] + ")"
  return block["text"] + f"\n  m/M = {block['condition_ratio']:.3g}"


def wants_report(config) -> bool:
  """Whether the run asks for the final-iterate report (default: yes)."""
  return bool(_hidden(config).get("report", True))
