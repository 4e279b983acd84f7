"""Every task of this package, registered, and the lookup by name.

Importing this module imports each task family's module, and each registers
its tasks in :mod:`experiments.tasks.registry` (explicit imports, no
cycle); the runner builds a task with :func:`get_task`.
"""

import ml_collections

from experiments.tasks import (  # noqa: F401  (each registers its tasks)
  common,
  images,
  imdb,
  llm,
  logreg,
  minilm,
  public_proxy,
  roberta_prompts,
  vader_llm,
)
from experiments.tasks.registry import TASKS, build_task, register
from experiments.tasks.task import Task

__all__ = ["TASKS", "Task", "build_task", "get_task", "register"]


def get_task(config: ml_collections.ConfigDict) -> Task:
  """Builds the task named by ``config.dataset``; with
  ``config.public_proxy``, its public proxy
  (:func:`~experiments.tasks.public_proxy.public_proxy_task`: public
  training and evaluation data, ``validation_size`` evaluation examples,
  balanced when the config sets ``examples_per_class``)."""
  task = build_task(config)
  if config.get("public_proxy"):
    task = public_proxy.public_proxy_task(
      task,
      eval_size=int(config.get("validation_size") or 1000),
      seed=common.data_seed(config),
      per_class=config.get("examples_per_class") or None,
    )
  return task
