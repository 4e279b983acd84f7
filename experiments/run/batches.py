"""The runner's batches: private ones from the run's secret, public ones.

Private batches (Poisson, without replacement) draw from the run's SECRET
(:mod:`zoprivacy.privacy.randomness`), never from a config seed; the full
batch has no randomness; the shuffling sampler is only for the non-private
baseline and may be seeded. Public batches carry no privacy cost and are
seeded.
"""

from __future__ import annotations

import numpy as np

from zoprivacy.privacy import batch_selection, randomness


def make_sampler(
  config,
  dataset_size: int,
  secret: bytes,
  supported=("poisson", "shuffle"),
  *,
  spec,
  plan=None,
):
  """The batch sampler; its randomness is the run's SECRET (except the
  non-private baseline's shuffling, which is seeded). ``spec``: the run's
  estimator declaration; ``plan``: the run's privacy plan, whose sampling
  scheme must account the batches drawn (:mod:`zoprivacy.privacy.batch_selection`)."""
  name = config.privacy.sampling
  if name not in supported:
    raise ValueError(
      f"privacy.sampling={name!r}, but the {config.dataset!r} loader "
      f"can only provide {supported}: it cannot draw the batches whose privacy "
      "the accountant would report."
    )
  if spec.private and name not in spec.sampling:
    schemes = " or ".join(
      "Poisson" if name == "poisson" else repr(name) for name in spec.sampling
    )
    raise ValueError(
      f"{config.estimator}'s privacy is accounted under {schemes} "
      f"sampling, not {name!r} ('shuffle' is only for the "
      "non-private baseline)."
    )
  selection = batch_selection.BatchSelection(
    name, dataset_size, config.privacy.expected_batch_size
  )
  if plan is not None:
    selection.check_plan(plan)  # the batches drawn are those accounted
  batch_secret = randomness.derive(secret, f"{name} sampler", num_bytes=32)
  return selection.sampler(secret=batch_secret, seed=config.seed + 1)


def public_batch_indices(
  config, num_public: int, step: int, *, spec
) -> np.ndarray | None:
  """Public examples for ``step``: uniform without replacement, seeded.

  Public data carries no privacy cost, so any (public) sampling is allowed;
  ``[k, b']`` indices for methods that take ``k`` public batches, ``[b']``
  otherwise.
  """
  if spec.public_data is None:
    return None
  if not num_public:
    raise ValueError(
      f"{config.estimator} needs public data: set config.public "
      "to a task that provides a public split."
    )
  k = (
    dict(spec.defaults, **config.estimator_kwargs).get("num_public_batches", 1)
    if spec.public_data == "batches"
    else 1
  )
  size = min(int(config.public_batch_size), num_public)
  rng = np.random.default_rng([config.seed, 2, int(step)])
  idx = np.stack(
    [rng.choice(num_public, size, replace=False) for _ in range(k)]
  )
  return idx if spec.public_data == "batches" else idx[0]
