"""One batch-selection value gives the sampler and the scheme it accounts."""

import types

import numpy as np
import pytest

from configs import default
from experiments.run import batches, settings
from zoprivacy.data import sampling
from zoprivacy.privacy import batch_selection, sampling_scheme
from zoprivacy.privacy import plan as plan_lib

SECRET = bytes(range(32))


def _plan(sampling_name="poisson", batch=64, n=1000, mechanism="gaussian"):
  noise = {} if mechanism == "none" else {"noise_multiplier": 1.0}
  return plan_lib.PrivacyPlan.build(
    mechanism=mechanism,
    **noise,
    clip=1.0,
    sampling=sampling_name,
    expected_batch_size=batch,
    dataset_size=n,
  )


@pytest.mark.parametrize(
  "name,cls",
  [
    ("poisson", sampling.PoissonSampler),
    ("without_replacement", sampling.WithoutReplacementSampler),
    ("full_batch", sampling.FullBatchSampler),
  ],
)
def test_the_sampler_draws_what_the_scheme_accounts(name, cls):
  selection = batch_selection.BatchSelection(name, 1000, 64)
  scheme = selection.scheme()
  assert scheme.name == name
  sampler = selection.sampler(secret=SECRET)
  assert type(sampler) is cls and sampler.scheme == name
  assert sampler.dataset_size == 1000
  if name == "poisson":
    assert sampler.sampling_probability == scheme.probability == 64 / 1000
  elif name == "without_replacement":
    assert sampler.batch_size == 64 and scheme.probability == 64 / 1000
    assert len(np.unique(sampler.batch_indices(3).indices)) == 64
  else:
    assert sampler.batch_size == 1000 and scheme.probability == 1.0
  selection.check_plan(_plan(name))  # the plan accounts these batches
  batch_selection.for_plan(_plan(name)).check_plan(_plan(name))


def test_private_batches_need_a_secret_and_shuffling_is_not_accounted():
  with pytest.raises(batch_selection.BatchSelectionError, match="secret"):
    batch_selection.BatchSelection("poisson", 100, 10).sampler(seed=0)
  shuffle = batch_selection.BatchSelection("shuffle", 100, 10)
  assert not shuffle.private
  assert type(shuffle.sampler(seed=1)) is sampling.ShuffleSampler
  with pytest.raises(batch_selection.BatchSelectionError, match="no privacy"):
    shuffle.scheme()
  with pytest.raises(batch_selection.BatchSelectionError, match="one of"):
    batch_selection.BatchSelection("poison", 100, 10)
  assert isinstance(
    batch_selection.BatchSelection("poisson", 100, 10).scheme(),
    sampling_scheme.PoissonSampling,
  )


@pytest.mark.parametrize(
  "name,batch,n",
  [("poisson", 65, 1000), ("poisson", 64, 999), ("shuffle", 64, 1000)],
)
def test_a_plan_accounting_other_batches_is_refused(name, batch, n):
  selection = batch_selection.BatchSelection(name, n, batch)
  with pytest.raises(batch_selection.BatchSelectionError, match="not those"):
    selection.check_plan(_plan())
  selection.check_plan(_plan(mechanism="none"))  # nothing to account


def test_the_runner_samples_from_the_selection_its_plan_accounts():
  typed = settings.Settings.from_config(default.get_config())
  spec = types.SimpleNamespace(private=True, sampling=("poisson",))
  sampler = batches.make_sampler(
    typed.for_dataset(1000), SECRET, spec=spec, plan=_plan()
  )
  assert sampler.sampling_probability == _plan().sampling.probability
  with pytest.raises(batch_selection.BatchSelectionError, match="not those"):
    batches.make_sampler(
      typed.for_dataset(1001), SECRET, spec=spec, plan=_plan()
    )
