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
    {"smoothing": 1e-3, "directions": "gaussian"}
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

  config.public_batch_size = (
    64  # public-data methods (PAZO, DPMD, DOPE-SGD, GEP)
  )
  # None: each step's batch at once. An int P: the step's per-example work
  # runs P rows at a time (a logical batch larger than memory), still one
  # release per step; not a privacy setting (docs/experiments.md).
  config.physical_batch_size = config_dict.placeholder(int)
  config.num_steps = 4000
  # Or the run's length in epochs (num_steps = None): ceil(num_epochs * n /
  # expected_batch_size) steps, n the private training set's size. A
  # --config.num_epochs override alone replaces num_steps.
  config.num_epochs = config_dict.placeholder(float)
  # The run's privacy value (zoprivacy.Privacy), every privacy setting once:
  # the estimator, its sampler, its plan and every epsilon come from it.
  config.privacy = ml_collections.ConfigDict(
    {
      # Per-example clip in the estimator's own units (dpzero: the finite
      # difference); None: the estimator's default (1.0; dp_zo's 2e-3 on
      # the raw loss difference).
      "clip": config_dict.FieldReference(1.0, field_type=float),
      # 'exact' (exact discrete noise on a grid of grid_points steps per
      # clip), 'secure_mode' or 'float' (exposed to floating-point attacks).
      "noise": "exact",
      "grid_points": 1024,
      # Calibrate the noise for this epsilon (None: noise_multiplier).
      "target_epsilon": config_dict.FieldReference(2.0, field_type=float),
      "noise_multiplier": config_dict.placeholder(float),  # or set it
      "delta": 1e-5,
      # 'poisson'; Noisy-ZOGD's 'full_batch' or 'without_replacement';
      # 'shuffle' for the non-private baseline only.
      "sampling": "poisson",
      "expected_batch_size": 64,
      "neighboring": "add_or_remove",  # or 'replace_one'
      "num_queries": 1,  # directions per step on one batch
      "mechanism": "gaussian",  # or 'laplace' (DP-ZO's)
    }
  )
  # Optional hard limit: the ledger refuses any step that would exceed it.
  config.epsilon_budget = config_dict.placeholder(float)
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
