"""The run's privacy value, from its config's ``privacy`` block.

``config.privacy`` holds every privacy setting of a run once (the fields of
``configs/default.py``): the clip, the noise kind and grid, the target
epsilon and delta or the noise multiplier, the sampling and expected batch
size, the neighbouring relation, the queries per step and the mechanism.
:class:`experiments.run.settings.RunPrivacy` reads it, typed, into the
:class:`zoprivacy.Privacy` the estimator is built from
(``config.insecure_test_noise`` makes its noise :class:`zoprivacy.TestNoise`
of the seed); :func:`value` is that value, for the checks before JAX. The fields of earlier releases
(``config.target_epsilon``, ``estimator_kwargs.clip``, ``exact_noise``,
...) are refused, each naming its new place (:data:`MOVED`).

Importing this module imports nothing heavy: a command line checks the block
before JAX loads.
"""

from __future__ import annotations

from experiments.run import settings
from zoprivacy.privacy import value as value_lib

NOISES = settings.NOISES
# Earlier releases' top-level fields, now in the privacy block.
MOVED = {
  name: f"privacy.{name}"
  for name in (
    "target_epsilon",
    "delta",
    "noise_multiplier",
    "sampling",
    "expected_batch_size",
  )
}
MOVED["exact_noise"] = "privacy.noise"  # True: 'exact', False: 'float'
MOVED["insecure_test_noise_seed"] = "insecure_test_noise"
# Earlier releases' estimator_kwargs of a private estimator, now in the
# privacy block.
MOVED_KWARGS = (
  "clip",
  "num_queries",
  "neighboring",
  "mechanism",
  "noise",
  "grid_points",
)

# What earlier releases' Noisy-ZOGD runs drew and were accounted under,
# whatever their privacy block said (the block's noise and neighbouring
# were not read then; its setting is built from the value now).
SETTING_RUN = {
  "privacy.noise": "secure_mode",
  "privacy.neighboring": "replace_one",
}


def normalized_setting(old: dict, new: dict) -> dict:
  """The flat config ``old`` of an earlier release's Noisy-ZOGD run with the
  noise and neighbouring it ran under (:data:`SETTING_RUN`), when ``new``
  (this run's) is one too; ``old`` itself otherwise."""
  if not (old.get("estimator") == new.get("estimator") == "noisy_zogd"):
    return old
  stale = {k: v for k, v in SETTING_RUN.items() if k in old and old[k] != v}
  return {**old, **stale} if stale else old


def new_name(name: str) -> str | None:
  """Where the field ``name`` (or ``estimator_kwargs.<k>``) of earlier
  releases is now; ``None`` for any other name."""
  if name in MOVED:
    return MOVED[name]
  key = name.removeprefix("estimator_kwargs.")
  if key != name and key in MOVED_KWARGS:
    return f"privacy.{key}"
  return None


def moved_hint(name: str) -> str | None:
  """``'name' (now privacy.x: --config.privacy.x=...)`` for a moved field."""
  new = new_name(name)
  if new is None:
    return None
  values = " ('exact' or 'float')" if name == "exact_noise" else ""
  return f"{name!r} (now {new}{values}: --config.{new}=...)"


def value(config, dataset_size: int) -> value_lib.Privacy:
  """The privacy value of ``config``'s block on ``dataset_size`` examples:
  calibrated by the estimator for ``target_epsilon`` over ``num_steps``
  (or ``num_epochs`` of its sampling: :mod:`experiments.run.run_length`)
  at ``delta``, unless ``noise_multiplier`` is set (a set multiplier wins;
  the ledger and the budget check what it spends). The run reads it from
  its settings (:attr:`experiments.run.settings.RunPrivacy.value`)."""
  return settings.RunPrivacy.from_config(config).on(dataset_size)
