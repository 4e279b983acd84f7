"""The runner's batches: private ones from the run's secret, public ones.

Private batches (Poisson, without replacement) draw from the run's SECRET
(:mod:`zoprivacy.privacy.randomness`), never from a config seed; the full
batch has no randomness; the shuffling sampler is only for the non-private
baseline and may be seeded. Public batches carry no privacy cost and are
seeded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from zoprivacy.privacy import batch_selection, randomness

if TYPE_CHECKING:
  from experiments.run.settings import Settings


def make_sampler(
  settings: Settings,
  secret: bytes,
  supported=("poisson", "shuffle"),
  *,
  spec,
  plan=None,
):
  """The batch sampler of the run of ``settings`` (bound to its dataset
  size: :meth:`~experiments.run.settings.Settings.for_dataset`); its
  randomness is the run's SECRET (except the non-private baseline's
  shuffling, which is seeded). ``spec``: the run's estimator declaration;
  ``plan``: the run's privacy plan, whose sampling scheme must account the
  batches drawn (:mod:`zoprivacy.privacy.batch_selection`)."""
  name = settings.privacy.sampling
  if name not in supported:
    raise ValueError(
      f"privacy.sampling={name!r}, but the {settings.dataset!r} loader "
      f"can only provide {supported}: it cannot draw the batches whose privacy "
      "the accountant would report."
    )
  if spec.private and name not in spec.sampling:
    schemes = " or ".join(
      "Poisson" if name == "poisson" else repr(name) for name in spec.sampling
    )
    raise ValueError(
      f"{settings.estimator}'s privacy is accounted under {schemes} "
      f"sampling, not {name!r} ('shuffle' is only for the "
      "non-private baseline)."
    )
  selection = selection_of(settings)
  if plan is not None:
    selection.check_plan(plan)  # the batches drawn are those accounted
  batch_secret = randomness.derive(secret, f"{name} sampler", num_bytes=32)
  return selection.sampler(secret=batch_secret, seed=settings.seed + 1)


def selection_of(settings: Settings) -> batch_selection.BatchSelection:
  """How the run's private batches are drawn (``settings`` bound to the
  dataset size): what every batch carries, so that its step can check it
  against the plan when traced."""
  p = settings.privacy
  return batch_selection.BatchSelection(
    p.sampling, p.dataset_size, p.expected_batch_size
  )


def public_batch_indices(
  settings: Settings, num_public: int, step: int, *, spec
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
      f"{settings.estimator} needs public data: set config.public "
      "to a task that provides a public split."
    )
  k = (
    dict(spec.defaults, **settings.estimator_kwargs).get(
      "num_public_batches", 1
    )
    if spec.public_data == "batches"
    else 1
  )
  size = min(int(settings.public_batch_size), num_public)
  rng = np.random.default_rng([settings.seed, 2, int(step)])
  idx = np.stack(
    [rng.choice(num_public, size, replace=False) for _ in range(k)]
  )
  return idx if spec.public_data == "batches" else idx[0]
