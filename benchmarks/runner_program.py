"""The runner's own training step, compiled on abstract weights of any
model shape: what the memory tables measure.

:func:`runner_step` builds ``configs/dpzero_table4_5_opt.py``'s run (DPZero
Tables 4 and 5: full fine-tuning, the runner's layer-wise step, exact
noise) on the task of ``dataset``, with the weights replaced by
``jax.ShapeDtypeStruct`` shapes of the model config given, stored in
``param_dtype`` (:func:`experiments.tasks.llm.task_with_model`), and lowers
the step a run of it jits (:func:`experiments.run.step_program.lowered`).
The data and tokenizer are the test fixtures' (only their shapes enter the
program); the noise multiplier is set (1.0) instead of calibrated, which
changes a constant of the program, not its memory.
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp

from configs import dpzero_table4_5_opt
from experiments.run import resolution, step_program
from experiments.tasks import llm
from zoprivacy.models.hf_checkpoint import load_bpe_tokenizer
from zoprivacy.models.llama import LlamaForCausalLM
from zoprivacy.models.opt import OPTConfig, OPTForCausalLM

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "tests" / "fixtures"
DATA = {"squad_opt": "squad_synthetic", "sst2_opt": "sst2_synthetic"}


def runner_config(
  param_dtype: str, *, dataset="squad_opt", length=256, **overrides
):
  """``configs/dpzero_table4_5_opt.py`` on the fixtures' files (the
  runner checks them) for ``dataset``, ``length`` tokens, weights stored in
  ``param_dtype``; ``overrides``: any other field."""
  config = dpzero_table4_5_opt.get_config()
  config.dataset = dataset
  config.model_dir = str(FIXTURES / "tiny_opt")
  config.data_dir = str(FIXTURES / DATA[dataset])
  config.num_train, config.num_eval = 64, 8
  config.max_length = length
  config.param_dtype = param_dtype
  config.privacy.noise_multiplier = 1.0
  config.update(overrides)
  return config


def abstract_model(model_config, param_dtype: str):
  """``(model class, model config, parameter shapes, tokenizer)``."""
  family = OPTForCausalLM if isinstance(model_config, OPTConfig) else None
  family = family or LlamaForCausalLM
  model = family(model_config, param_dtype=llm.PARAM_DTYPES[param_dtype])
  ids = jnp.zeros((1, 8), jnp.int32)
  params = jax.eval_shape(
    lambda: model.init(jax.random.key(0), ids, jnp.ones_like(ids))["params"]
  )
  tokenizer = load_bpe_tokenizer(str(FIXTURES / "tiny_opt"))
  return family, model_config, params, tokenizer


def runner_step(model_config, param_dtype: str, rows: int, **config_fields):
  """The runner's step (lowered) of :func:`runner_config` on
  ``model_config``'s shapes, a batch of ``rows`` examples."""
  config = runner_config(param_dtype, **config_fields)
  task = llm.task_with_model(config, abstract_model(model_config, param_dtype))
  return step_program.lowered(*resolution.resolve(config), task, rows)
