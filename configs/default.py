"""Offline default: DPZero on scikit-learn's digits with a small CNN, eps = 2.

python -m experiments.run --config configs/default.py
"""

import ml_collections
from ml_collections import config_dict


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.dataset = "digits"
  config.model = "cnn"
  config.model_kwargs = ml_collections.ConfigDict({"features": (16, 32)})
  # PUBLIC seed: model initialization, directions and public batches. The
  # noise and the Poisson batches are secret (OS entropy), never seeded.
  config.seed = 0

  config.estimator = "dpzero"
  config.estimator_kwargs = ml_collections.ConfigDict(
    {
      "clip": 1.0,  # on the per-example finite difference
      "smoothing": 1e-3,
      "directions": "gaussian",
      "num_queries": 1,
    }
  )
  config.optimizer = "sgd"  # any optax optimizer by name
  config.optimizer_kwargs = ml_collections.ConfigDict()
  # None: the estimator's registered step size (dpzero: 0.02; each
  # estimator registers its own, so --config.estimator=mezo gets mezo's).
  config.learning_rate = config_dict.placeholder(float)
  config.momentum = 0.0
  config.schedule = ""  # e.g. "cosine_decay_schedule"
  config.schedule_kwargs = ml_collections.ConfigDict()
  config.data_dir = ""

  config.sampling = "poisson"
  config.public_batch_size = (
    64  # public-data methods (PAZO, DPMD, DOPE-SGD, GEP)
  )
  config.expected_batch_size = 64
  # None: each step's batch at once. An int P: the step's per-example work
  # runs P rows at a time (a logical batch larger than memory), still one
  # release per step; not a privacy setting (docs/experiments.md).
  config.physical_batch_size = config_dict.placeholder(int)
  config.num_steps = 4000
  config.target_epsilon = config_dict.placeholder(float)
  config.target_epsilon = 2.0  # calibrate the noise for this epsilon

  config.noise_multiplier = config_dict.placeholder(float)
  config.delta = 1e-5
  # Optional hard limit: the ledger refuses any step that would exceed it.
  config.epsilon_budget = config_dict.placeholder(float)

  # Exact discrete noise on a quantized sum (scalar estimators, one query,
  # add/remove); other cases fall back to float noise and the report says so.
  config.exact_noise = True
  # Reproducible noise and batches from the seed: NOT private; for tests and
  # debugging only. Rejected with epsilon_budget unless test_run is set.
  config.insecure_test_noise = False
  config.test_run = False
  # Check once at start-up, on synthetic inputs, that the loss is per-example.
  config.check_per_example = True

  # Device mesh (experiments/run/placement.py): sizes of the data and fsdp axes
  # (model must stay 1); one may be -1, the devices left over. The default
  # puts every device on data: one CPU, or all of a machine's accelerators.
  config.mesh = ml_collections.ConfigDict({"data": -1, "fsdp": 1, "model": 1})

  # Several processes (hosts), experiments/run/multihost.py: enabled calls
  # jax.distributed.initialize; an empty coordinator_address auto-detects
  # the cluster (TPU pod slice, SLURM, Open MPI). cpu_collectives="gloo" for
  # CPU-only processes. docs/scaling.md has launch recipes.
  config.distributed = ml_collections.ConfigDict(
    {
      "enabled": False,
      "coordinator_address": "",
      "num_processes": 0,
      "process_id": -1,
      "local_device_ids": "",
      "cpu_collectives": "",
    }
  )

  # The layer-wise step at inference-level memory for tasks with an in-scan
  # loss (the OPT tasks): mezo, dpzero or dp_zo with plain SGD
  # (experiments/run/layerwise_run.py). The same step as the generic one.
  config.layerwise = False

  # Write workdir/trajectory.bin, the public (seed, scalars) log of a scalar
  # estimator's run (docs/trajectory.md). Publishing it publishes every
  # iterate: composition accounting only, no final-iterate bound.
  config.trajectory_log = False

  # Train and evaluate on the task's public data instead of its private
  # data (experiments/tasks/public_proxy.py): choose hyperparameters at no
  # privacy cost. experiments/public_selection.py sweeps a grid with it.
  config.public_proxy = False

  config.eval_every = 1000
  config.checkpoint_every = 1000  # only when workdir is set
  config.workdir = ""
  # A workdir belongs to one config; "force" resumes a differing one anyway.
  config.resume = ""
  return config
