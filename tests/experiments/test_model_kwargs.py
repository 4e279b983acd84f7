"""``config.model_kwargs`` names are checked against the model they go to."""

import ml_collections
import pytest

from experiments import tasks
from experiments.tasks import common
from zoprivacy.models import small


def _config(**kwargs):
  return ml_collections.ConfigDict(
    {"model_kwargs": ml_collections.ConfigDict(kwargs)}
  )


def test_lists_become_tuples_and_known_names_pass():
  kw = common.model_kwargs(_config(hidden=[32, 16]), small.MLP)
  assert kw == {"hidden": (32, 16)}
  assert small.MLP(num_classes=3, **kw).hidden == (32, 16)


def test_a_typo_names_the_close_field():
  with pytest.raises(ValueError) as e:
    common.model_kwargs(_config(hiden=(8,)), small.MLP)
  message = str(e.value)
  assert "'hiden'" in message and "did you mean 'hidden'?" in message
  assert "it takes hidden, num_classes" in message


def test_a_name_far_from_every_field_lists_them():
  with pytest.raises(ValueError, match="does not take 'depth'; it takes"):
    common.model_kwargs(_config(depth=3), small.SmallCNN)


def test_the_image_task_checks_before_building():
  config = _config(hiden=(8,))
  config.model = "mlp"
  config.dataset = "digits"
  config.seed = 0
  with pytest.raises(ValueError, match="did you mean 'hidden'"):
    tasks.build_task(config)
