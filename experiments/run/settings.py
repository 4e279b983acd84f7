"""The typed run: a completed, validated config read once into frozen values.

:meth:`Settings.from_config` is THE conversion of a run's config
(:func:`experiments.run.resolution.resolve` calls it once, right after
:func:`experiments.run.config_defaults.complete` and
:func:`experiments.run.preflight.validate`); below it nothing reads the
``ml_collections`` config. Every field of ``configs/default.py`` has a
typed field here: the fixed blocks as frozen classes (:class:`Mesh`,
:class:`Distributed`, :class:`HiddenState`), the privacy block as
:class:`RunPrivacy` (whose :attr:`RunPrivacy.value` is the run's
:class:`zoprivacy.Privacy`), the free-form keyword blocks
(``estimator_kwargs``, ...) and the task's and estimator's declared fields
as read-only mappings (:class:`FrozenMap`: a callee cannot change them).

Two steps of the resolution need more than the config:
:meth:`Settings.with_learning_rate` (the estimator's registered step size
when the config sets none) and :meth:`Settings.for_dataset`, called once
the training set is loaded (``num_epochs`` counted in steps; the privacy
value's sampling bound to the dataset size).

The config as written (completed, the learning rate filled, the steps
counted) is kept as a plain snapshot for what must be the config itself:
the workdir's fingerprint and ``result.json``'s echo
(:meth:`Settings.config_dict`), and the task builders, a plugin boundary
that takes a ``ConfigDict`` (:meth:`Settings.task_config`, read-only).

Importing this module imports nothing heavy (no JAX).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping
from typing import Any

import ml_collections

from configs import default
from experiments.run import config_defaults, run_length
from zoprivacy.privacy import target as target_lib
from zoprivacy.privacy import value as value_lib

NOISES = ("exact", "secure_mode", "float")


class FrozenMap(Mapping):
  """A read-only mapping (nested ones too; lists become tuples), hashable
  when its values are."""

  def __init__(self, items: Mapping | None = None):
    self._items = {k: freeze(v) for k, v in (items or {}).items()}

  def __getitem__(self, key):
    return self._items[key]

  def __iter__(self) -> Iterator:
    return iter(self._items)

  def __len__(self) -> int:
    return len(self._items)

  def __hash__(self) -> int:
    return hash(tuple(sorted(self._items.items(), key=lambda kv: str(kv[0]))))

  def __eq__(self, other) -> bool:
    return isinstance(other, Mapping) and dict(self) == dict(other)

  def __repr__(self) -> str:
    return f"FrozenMap({self._items!r})"


def freeze(value):
  """``value`` read-only: mappings as :class:`FrozenMap`, lists as tuples."""
  if isinstance(value, Mapping | ml_collections.ConfigDict):
    return value if isinstance(value, FrozenMap) else FrozenMap(dict(value))
  if isinstance(value, list | tuple):
    return tuple(freeze(v) for v in value)
  return value


def thaw(value):
  """A plain copy of a frozen ``value``: its mappings as dicts (a config's
  lists stay tuples)."""
  if isinstance(value, Mapping):
    return {k: thaw(v) for k, v in value.items()}
  if isinstance(value, tuple):
    return tuple(thaw(v) for v in value)
  return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class Mesh:
  """``config.mesh``: sizes of the mesh axes (one may be -1)."""

  data: int = -1
  fsdp: int = 1
  model: int = 1

  def axes(self) -> dict[str, int]:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Distributed:
  """``config.distributed``: :func:`jax.distributed.initialize`'s fields."""

  enabled: bool = False
  coordinator_address: str = ""
  num_processes: int = 0
  process_id: int | None = -1  # -1 or None: auto-detected
  # "0,1", a tuple of ids or one id (multihost.parse_local_device_ids).
  local_device_ids: str | int | tuple[int, ...] = ""
  cpu_collectives: str = ""

  @classmethod
  def from_block(cls, block) -> Distributed:
    """The block as the config gives it (missing keys: the defaults)."""
    names = {f.name for f in dataclasses.fields(cls)}
    given = dict(block or {})
    return cls(**{k: freeze(v) for k, v in given.items() if k in names})


@dataclasses.dataclass(frozen=True, kw_only=True)
class HiddenState:
  """``config.hidden_state`` (Noisy-ZOGD's final-iterate report)."""

  report: bool = True
  checkpoints_private: bool = False


def _noise(
  block, test_seed: int | None
) -> (
  value_lib.Exact | value_lib.SecureMode | value_lib.Float | value_lib.TestNoise
):
  kind = block.get("noise", "exact")
  if kind not in NOISES:
    raise ValueError(f"privacy.noise must be one of {NOISES}, got {kind!r}.")
  chosen = {
    "exact": lambda: value_lib.Exact(int(block.get("grid_points", 1024))),
    "secure_mode": value_lib.SecureMode,
    "float": value_lib.Float,
  }[kind]()
  return chosen if test_seed is None else value_lib.TestNoise(test_seed, chosen)


def _selection(sampling: str, dataset_size: int, size):
  """The batch selection of the privacy block (``None`` for 'shuffle')."""
  if sampling == "shuffle":
    return None
  if sampling == "full_batch":
    return value_lib.FullBatch(dataset_size)
  if sampling == "without_replacement":
    return value_lib.WithoutReplacement(
      dataset_size=dataset_size, batch_size=int(size)
    )
  return value_lib.Poisson(dataset_size=dataset_size, expected_batch_size=size)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunPrivacy:
  """``config.privacy`` and ``epsilon_budget``: the run's
  :class:`zoprivacy.Privacy`, and what that value cannot hold before the
  training set is loaded, or at all.

  ``base`` holds every privacy setting of the block that needs no data:
  the clip, the noise, a set noise multiplier, the neighbouring relation,
  the queries per step and the mechanism. The value's sampling needs the
  dataset size, and a target in epochs is counted on that sampling, so
  until :meth:`Settings.for_dataset` binds the size they are kept here
  (the scheme's name, the expected batch size, the :class:`Target`);
  :attr:`value` is then the whole value. ``delta`` is the ledger's and
  every report's (the target's, or the one reported with a set noise
  multiplier); ``epsilon_budget`` the ledger's limit."""

  base: value_lib.Privacy  # no sampling, no target
  # The target to calibrate for (None when noise_multiplier is set).
  target: target_lib.Target | None = None
  delta: float = 1e-5
  sampling: str = "poisson"  # or 'full_batch', 'without_replacement', 'shuffle'
  expected_batch_size: float | None = None
  epsilon_budget: float | None = None
  dataset_size: int | None = None  # bound by Settings.for_dataset

  @classmethod
  def from_config(cls, config) -> RunPrivacy:
    """The block of ``config`` (``insecure_test_noise``: test noise)."""
    block = config.privacy
    sigma = block.get("noise_multiplier")
    target = None
    if sigma is None and block.get("target_epsilon") is not None:
      epochs = config.get("num_epochs")
      target = target_lib.Target(  # epochs: counted on the sampling
        epsilon=float(block.target_epsilon),
        delta=float(block.delta),
        num_steps=None if epochs is not None else int(config.num_steps),
        num_epochs=epochs,
      )
    test = config.get("insecure_test_noise")
    base = value_lib.Privacy(
      clip=block.get("clip"),
      noise=_noise(block, int(config.seed) if test else None),
      noise_multiplier=None if sigma is None else float(sigma),
      neighboring=block.get("neighboring", "add_or_remove"),
      num_queries=int(block.get("num_queries", 1)),
      mechanism=block.get("mechanism", "gaussian"),
    )
    return cls(
      base=base,
      target=target,
      delta=block.get("delta"),
      sampling=block.get("sampling", "poisson"),
      expected_batch_size=block.get("expected_batch_size"),
      epsilon_budget=config.get("epsilon_budget"),
    )

  @property
  def target_epsilon(self) -> float | None:
    return None if self.target is None else self.target.epsilon

  def batch_size(self, dataset_size: int) -> float:
    """The (expected) batch of a step: the whole set for the full batch."""
    if self.sampling == "full_batch":
      return dataset_size
    return self.expected_batch_size

  def on(self, dataset_size: int) -> value_lib.Privacy:
    """The privacy value on ``dataset_size`` training examples."""
    selection = _selection(
      self.sampling, dataset_size, self.expected_batch_size
    )
    return self.base.replace(sampling=selection, target=self.target)

  @functools.cached_property
  def value(self) -> value_lib.Privacy:
    """The run's privacy value (uncalibrated when a target is set), on the
    bound dataset size; built once, when first read."""
    if self.dataset_size is None:
      raise ValueError(
        "the run's privacy value needs its dataset size: read it from the "
        "settings that Settings.for_dataset(n) returns."
      )
    return self.on(self.dataset_size)


def _steps(value) -> int | None:
  if isinstance(value, float) and value.is_integer():
    return int(value)
  return value


# configs/default.py's fields (the schema every config is completed to).
SCHEMA = tuple(default.get_config().keys())
# Fields held by a typed block, not by Settings' own field of that name.
IN_BLOCKS = ("privacy", "epsilon_budget", "mesh", "distributed")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settings:
  """Every field a run reads, typed (the module docstring). Frozen; the
  mappings are read-only."""

  dataset: str
  model: str
  model_kwargs: FrozenMap  # free-form: the model builder's keywords
  seed: int  # PUBLIC: initialization, directions, public batches
  estimator: str
  estimator_kwargs: FrozenMap  # free-form: the factory's keywords
  optimizer: str
  optimizer_kwargs: FrozenMap  # free-form: the optax factory's keywords
  learning_rate: float | None
  learning_rate_source: str = "set by the config"
  momentum: float = 0.0
  schedule: str = ""
  schedule_kwargs: FrozenMap = FrozenMap()  # free-form: the schedule's
  data_dir: str = ""
  public_batch_size: int = 64
  physical_batch_size: int | None = None
  num_steps: int | None = None  # counted from num_epochs by for_dataset
  num_epochs: float | None = None
  privacy: RunPrivacy
  insecure_test_noise: bool = False
  test_run: bool = False
  check_per_example: bool = True
  mesh: Mesh = Mesh()
  distributed: Distributed = Distributed()
  layerwise: bool = False
  trajectory_log: bool = False
  public_proxy: bool = False
  eval_every: int = 0
  checkpoint_every: int = 0
  workdir: str = ""
  resume: str = ""
  hidden_state: HiddenState = HiddenState()
  # The task's and the estimator's declared fields (each reader says its
  # type: the task registry's declarations, an estimator's config_fields).
  declared: FrozenMap = FrozenMap()
  # The config as written (completed; the learning rate filled and the
  # steps counted as the run resolves them): config_dict / task_config.
  written: FrozenMap = dataclasses.field(default=FrozenMap(), repr=False)

  @classmethod
  def from_config(cls, config) -> Settings:
    """THE conversion of a completed, validated config."""
    d = config.to_dict()  # references resolved
    top = {k: d[k] for k in SCHEMA if k in d and k not in IN_BLOCKS}
    hidden = dict(d.get("hidden_state") or {})
    return cls(
      **{
        **top,
        "model_kwargs": freeze(top.get("model_kwargs") or {}),
        "estimator_kwargs": freeze(top.get("estimator_kwargs") or {}),
        "optimizer_kwargs": freeze(top.get("optimizer_kwargs") or {}),
        "schedule_kwargs": freeze(top.get("schedule_kwargs") or {}),
        "schedule": top.get("schedule") or "",
        "momentum": float(top.get("momentum") or 0.0),
        "num_steps": _steps(top.get("num_steps")),
        "eval_every": int(top.get("eval_every") or 0),
        "checkpoint_every": int(top.get("checkpoint_every") or 0),
        "workdir": top.get("workdir") or "",
        "resume": top.get("resume") or "",
      },
      privacy=RunPrivacy.from_config(config),
      mesh=Mesh(**dict(d.get("mesh") or {})),
      distributed=Distributed.from_block(config.get("distributed")),
      hidden_state=HiddenState(
        report=bool(hidden.get("report", True)),
        checkpoints_private=bool(hidden.get("checkpoints_private", False)),
      ),
      declared=freeze(
        {k: v for k, v in d.items() if k not in SCHEMA and k != "hidden_state"}
      ),
      written=freeze(d),
    )

  def replace(self, **changes) -> Settings:
    """A copy with ``changes`` (the written config follows the fields of
    the schema it holds)."""
    written = dict(self.written)
    written.update({k: v for k, v in changes.items() if k in written})
    return dataclasses.replace(self, **changes, written=freeze(written))

  def with_learning_rate(self, spec) -> Settings:
    """The estimator's registered step size (``spec``: its declaration)
    when the config sets none, and where it came from."""
    if self.learning_rate is not None:
      return self
    if spec.learning_rate is None:
      return dataclasses.replace(self, learning_rate_source="not set")
    return self.replace(
      learning_rate=spec.learning_rate,
      learning_rate_source=f"{spec.name}'s registered default",
    )

  def for_dataset(self, dataset_size: int) -> Settings:
    """The settings of the run on ``dataset_size`` training examples:
    ``num_epochs`` counted in steps (:mod:`experiments.run.run_length`),
    the privacy value's sampling bound to the dataset size."""
    steps = run_length.num_steps(
      self.num_steps,
      self.num_epochs,
      self.privacy.batch_size(dataset_size),
      dataset_size,
    )
    privacy = dataclasses.replace(self.privacy, dataset_size=dataset_size)
    out = dataclasses.replace(self, privacy=privacy)
    return out if steps == self.num_steps else out.replace(num_steps=steps)

  def field(self, name: str):
    """The declared field ``name`` (a task's or the estimator's); one
    paragraph naming a config of ``configs/`` that sets it when the config
    does not."""
    if name not in self.declared:
      missing = AttributeError(KeyError(name))
      raise ValueError(config_defaults.missing_field(missing))
    return self.declared[name]

  def epochs(self, steps: int) -> float:
    """The epochs ``steps`` steps draw in expectation on the bound
    training set (``num_epochs`` itself when the run is given in epochs)."""
    n = self.privacy.dataset_size
    return run_length.epochs(
      self.num_epochs, steps, self.privacy.batch_size(n), n
    )

  def config_dict(self) -> dict[str, Any]:
    """The config as written, a plain mutable copy: the workdir's
    fingerprint and result.json's echo."""
    return thaw(self.written)

  def task_config(self) -> ml_collections.ConfigDict:
    """The config as written, read-only, for what takes a ``ConfigDict``
    (the task builders: a plugin boundary)."""
    return ml_collections.FrozenConfigDict(self.config_dict())
