"""The multi-host launch recipes of docs/scaling.md, through JAX's own
cluster detection (``jax._src.clusters``) in a faked SLURM or Cloud TPU
environment: the command's flags go through the config flag parser and
:func:`experiments.run.multihost.initialize` (with ``jax.distributed.initialize``
replaced by a recorder), then JAX fills in what the cluster says. No
process is started and no device is touched."""

import pathlib
import re

import jax
import pytest
from absl import flags
from jax._src.clusters import cloud_tpu_cluster
from jax._src.clusters import cluster as cluster_lib
from ml_collections import config_flags

from experiments.run import multihost, settings

DOC = pathlib.Path(__file__).parents[2] / "docs" / "scaling.md"
CLUSTER_VARS = re.compile(r"^(SLURM_|OMPI_|PMI_|TPU_|MEGASCALE_|JAX_)")


def _block(marker: str) -> str:
  """The fenced code block of docs/scaling.md that contains ``marker``."""
  blocks = re.findall(r"```\w*\n(.*?)```", DOC.read_text(), re.S)
  (block,) = [b for b in blocks if marker in b]
  return block


def _config_flags(block: str) -> list[str]:
  """The block's ``--config.<field>=<value>`` words (also inside quotes)."""
  return re.findall(r"--config\.[\w.]+=[^\s\"\\]+", block)


def _parse(argv: list[str]):
  """The config as ``python -m experiments.run`` would parse it."""
  argv = ["run", *argv]
  values = flags.FlagValues()
  config_flags.DEFINE_config_file("config", flag_values=values, sys_argv=argv)
  values(argv)
  return values.config


def _initialize_kwargs(config, monkeypatch) -> dict:
  seen = {}
  monkeypatch.setattr(jax.distributed, "is_initialized", lambda: False)
  monkeypatch.setattr(
    jax.distributed, "initialize", lambda **kw: seen.update(kw)
  )
  multihost.initialize(settings.Distributed.from_block(config.distributed))
  return seen


def _detect(kwargs: dict):
  """JAX's auto-detection, as ``jax.distributed.initialize`` calls it."""
  return cluster_lib.ClusterEnv.auto_detect_unset_distributed_params(
    kwargs.get("coordinator_address"),
    kwargs.get("num_processes"),
    kwargs.get("process_id"),
    kwargs.get("local_device_ids"),
    None,  # cluster_detection_method: auto
    60,
  )


@pytest.fixture
def clean_env(monkeypatch):
  import os

  for name in list(os.environ):
    if CLUSTER_VARS.match(name):
      monkeypatch.delenv(name)
  return monkeypatch


def _slurm(monkeypatch, *, nodes, tasks_per_node, proc_id):
  monkeypatch.setenv("SLURM_JOB_ID", "4242")
  monkeypatch.setenv("SLURM_STEP_NODELIST", f"gpu[001-{nodes:03d}]")
  monkeypatch.setenv("SLURM_STEP_NUM_NODES", str(nodes))
  monkeypatch.setenv("SLURM_NTASKS", str(nodes * tasks_per_node))
  monkeypatch.setenv("SLURM_PROCID", str(proc_id))
  monkeypatch.setenv("SLURM_LOCALID", str(proc_id % tasks_per_node))


def _sbatch(block: str) -> dict:
  line = next(s for s in block.splitlines() if s.startswith("#SBATCH"))
  return {k: int(v) for k, v in re.findall(r"--([a-z-]+)=(\d+)", line)}


@pytest.mark.parametrize("proc_id", [0, 1])
def test_the_slurm_recipe_gives_each_process_every_gpu_of_its_node(
  proc_id, clean_env
):
  block = _block("#SBATCH")
  sbatch = _sbatch(block)
  assert sbatch == {"nodes": 2, "ntasks-per-node": 1, "gpus-per-node": 8}
  config = _parse(["--config=configs/opt_llm.py", *_config_flags(block)])
  kwargs = _initialize_kwargs(config, clean_env)
  _slurm(clean_env, nodes=2, tasks_per_node=1, proc_id=proc_id)
  address, processes, pid, local = _detect(kwargs)
  assert address == f"gpu001:{4242 % 4096 + 61440}"
  assert (processes, pid) == (2, proc_id)
  assert local == list(range(8))  # jax_cuda_visible_devices = 0,...,7
  assert len(local) == sbatch["gpus-per-node"] // sbatch["ntasks-per-node"]
  # the recipe's mesh uses every GPU of the job
  assert config.mesh.data * config.mesh.fsdp == processes * len(local) == 16


def test_without_local_device_ids_slurm_gives_one_gpu_per_process(clean_env):
  """Why the recipe sets local_device_ids: JAX's SLURM default is the GPU
  of the local task id, right for one task per GPU (16 processes of 1 GPU,
  the documented alternative) and wrong for one task per node."""
  config = _parse(
    ["--config=configs/opt_llm.py", "--config.distributed.enabled=True"]
  )
  kwargs = _initialize_kwargs(config, clean_env)
  assert "local_device_ids" not in kwargs
  _slurm(clean_env, nodes=2, tasks_per_node=1, proc_id=1)
  assert _detect(kwargs)[1:] == (2, 1, [0])  # 2 GPUs of 16
  _slurm(clean_env, nodes=2, tasks_per_node=8, proc_id=13)
  assert _detect(kwargs)[1:] == (16, 13, [5])  # one task per GPU: all 16


def test_the_tpu_recipe_leaves_every_chip_to_its_host(clean_env):
  """On a Cloud TPU VM JAX never restricts a process's devices: with the
  recipe's flags (no local_device_ids) each of the 8 host processes of a
  v5e-32 keeps its 4 chips. The slice is faked as GKE describes it
  (worker host names in the environment: no metadata server is asked)."""
  block = _block("gcloud compute tpus")
  config = _parse(["--config=configs/opt_llm.py", *_config_flags(block)])
  assert config.mesh.fsdp == -1 and config.mesh.data == 1
  kwargs = _initialize_kwargs(config, clean_env)
  assert kwargs == {}  # everything from the slice
  clean_env.setattr(cluster_lib, "running_in_cloud_tpu_vm", True)
  clean_env.setattr(cloud_tpu_cluster, "running_in_cloud_tpu_vm", True)
  clean_env.setenv("TPU_SKIP_MDS_QUERY", "1")
  clean_env.setenv("TPU_WORKER_HOSTNAMES", ",".join(["localhost"] * 8))
  clean_env.setenv("TPU_WORKER_ID", "3")
  clean_env.setenv("MEGASCALE_NUM_SLICES", "1")
  clean_env.setenv("MEGASCALE_SLICE_ID", "0")
  clean_env.setenv("MEGASCALE_COORDINATOR_ADDRESS", "localhost")

  def no_metadata_server(key):
    raise AssertionError(f"asked the metadata server for {key!r}")

  clean_env.setattr(cloud_tpu_cluster, "get_metadata", no_metadata_server)
  address, processes, pid, local = _detect(kwargs)
  assert address.startswith("localhost:")
  assert (processes, pid, local) == (8, 3, None)  # None: all local chips


@pytest.mark.parametrize(
  "value, ids",
  [
    ("0,1", [0, 1]),
    ("0, 1, 2", [0, 1, 2]),
    ("[4,5]", [4, 5]),
    ((0, 1), [0, 1]),
    ([2, 3], [2, 3]),
    (3, [3]),
    ("7", [7]),
    ("", None),
    (None, None),
    ((), None),
  ],
)
def test_local_device_ids_forms(value, ids):
  assert multihost.parse_local_device_ids(value) == ids


@pytest.mark.parametrize("value", ["a,b", "0,0", "-1", True, [0.5]])
def test_bad_local_device_ids_are_refused(value):
  with pytest.raises(ValueError, match="local_device_ids"):
    multihost.parse_local_device_ids(value)


def test_the_command_line_list_reaches_jax_as_a_list(monkeypatch):
  """``--config.distributed.local_device_ids=0,1`` used to crash (each
  character became an int); now JAX gets ``[0, 1]``."""
  config = _parse(
    [
      "--config=configs/default.py",
      "--config.distributed.enabled=True",
      "--config.distributed.local_device_ids=0,1",
    ]
  )
  assert config.distributed.local_device_ids == "0,1"
  kwargs = _initialize_kwargs(config, monkeypatch)
  assert kwargs == {"local_device_ids": [0, 1]}
