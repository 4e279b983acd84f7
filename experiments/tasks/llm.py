"""OPT causal-LM tasks of the MeZO / DP-ZO / DPZero suite.

Classification (``sst2_opt``, ``sst5_opt``, ``rte_opt``, ``qnli_opt``,
``mnli_opt``, ``snli_opt``, ``boolq_opt``, ``trec_opt``, ``cb_opt``,
``wsc_opt``, ``wic_opt``, ``multirc_opt``): each example's inputs are its
``C`` candidate sequences (``prompts.candidate_batch``, ``[N, C, S]``);
``apply`` returns the logits ``-loss_c`` with ``loss_c`` the mean negative
log-likelihood of candidate ``c``'s verbalizer tokens, so the task's
cross-entropy is MeZO's ``train_as_classification`` objective and argmax of
the logits is MeZO's prediction.

Multiple choice (``copa_opt``, ``record_opt``): the candidates come from the
example (COPA's two choices, ReCoRD's passage entities). As in MeZO
(``--train_as_classification False``), the inputs are the gold candidate's
sequence and ``batched_loss`` its teacher-forced loss; the task evaluates
itself by the accuracy of the best-scoring candidate
(:mod:`experiments.tasks.llm_choice`; ``test_accuracy``).

Generation (``squad_opt``, ``drop_opt``): inputs are prompt + first gold
answer, ``batched_loss`` is the teacher-forced answer loss
(``per_example_lm_loss``); the labels are placeholders. The task evaluates
itself (``Task.evaluate``): greedy decoding with the key/value cache,
scored by MeZO's SQuAD F1 and exact match (``test_f1``,
``test_exact_match``; never an accuracy).

Config: ``model_dir`` (Hugging Face OPT folder), ``data_dir``, ``num_train``
(MeZO: 1000) or, for classification, ``examples_per_class`` (k-shot),
``num_eval`` (1000), ``max_length`` (256), ``data_seed``; for generation
``max_new_tokens`` (50) and ``eval_batch_size`` (8 sequences; multiple
choice: 64 candidate rows); ``peft`` (``full``, ``lora`` with
``lora_rank``, ``lora_alpha``, ``lora_targets``, or ``prefix`` with
``num_prefix_tokens``).

Files, under ``data_dir``: :mod:`experiments.tasks.llm_data` (Hugging Face
exports as ``<task>/{train,validation}.jsonl``, SuperGLUE's release
folders, SQuAD v1.1 and DROP in their original JSON).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments.tasks import llm_choice, llm_data, llm_files
from experiments.tasks.common import data_seed
from experiments.tasks.llm_export import exporter, stacked_lora
from experiments.tasks.peft import LORA_FIELDS
from experiments.tasks.registry import register
from experiments.tasks.task import Task
from zoprivacy.core.low_precision import is_narrow
from zoprivacy.data import prompts
from zoprivacy.data.loaders import mezo_tasks as mt
from zoprivacy.metrics import qa_generation
from zoprivacy.models import causal_lm_zo, llama
from zoprivacy.models.hf_checkpoint import load_bpe_tokenizer, load_opt
from zoprivacy.models.hf_llama import load_llama
from zoprivacy.models.opt import (
  OPTForCausalLM,
  answer_window,
  per_example_lm_loss,
)
from zoprivacy.models.prefix_tuning import PrefixTuning


def _causal_lm(config):
  """``(model class, config, params, tokenizer)`` of ``config.model_dir``:
  a Hugging Face OPT, Llama or Mistral folder (by its ``model_type``),
  whose files :func:`check_files` found. The tokenizer is read first: a
  broken one fails before any weight is loaded."""

  model_dir = config.model_dir
  tokenizer = load_bpe_tokenizer(model_dir)
  dtype = param_dtype(config)
  if llm_files.model_family(config) in llama.MODEL_TYPES:
    model_class = llama.LlamaForCausalLM
    cfg, params = load_llama(model_dir, param_dtype=dtype)
  else:
    model_class = OPTForCausalLM
    cfg, params = load_opt(model_dir, param_dtype=dtype)
  return model_class, cfg, params, tokenizer


PARAM_DTYPES = {
  "float32": jnp.float32,
  "bfloat16": jnp.bfloat16,
  "float16": jnp.float16,  # MeZO's --load_float16
}


def param_dtype(config):
  """``config.param_dtype``: the dtype the pretrained weights are stored in
  (``'float32'``, the default, ``'bfloat16'`` or ``'float16'``); with
  ``peft='full'`` also the dtype the trained weights are stored in."""
  name = config.get("param_dtype") or "float32"
  if name not in PARAM_DTYPES:
    raise ValueError(
      f"param_dtype={name!r}; use one of {sorted(PARAM_DTYPES)}."
    )
  return PARAM_DTYPES[name]


def _float32_adapters(init):
  """``init`` with the trainable adapters (LoRA, prefix) in float32: they
  are small and new, while the frozen weights stay as stored. Fully
  fine-tuned weights are not cast: they stay in the stored dtype, perturbed
  in float32 one layer at a time and stochastically rounded when updated
  (:mod:`zoprivacy.core.low_precision`)."""

  def float32_init(key):
    trainable, frozen = init(key)
    cast = lambda x: x.astype(jnp.float32) if is_narrow(x) else x
    return jax.tree.map(cast, trainable), frozen

  return float32_init


def _fine_tuning(config, params, model_config):
  """``(init, merged, model_config)`` for ``config.peft``: ``full`` trains
  every weight; ``lora`` trains :class:`~zoprivacy.models.peft.StackedLoRA`
  adapters (rank ``lora_rank``, scale ``lora_alpha / rank``; MeZO's r = 8,
  alpha = 16 by default) on the stacked query and value projections;
  ``prefix`` trains :class:`~zoprivacy.models.prefix_tuning.PrefixTuning`'s
  ``num_prefix_tokens`` (MeZO's 5) keys and values per layer, initialized
  from the activations of random tokens drawn with the public seed. The
  pretrained weights are frozen in both."""
  mode = config.get("peft") or "full"
  if mode == "full":
    return (lambda key: (params, {})), (lambda t, f: t), model_config
  if mode == "prefix":
    prefix = PrefixTuning(num_tokens=int(config.get("num_prefix_tokens") or 5))
    return (
      (lambda key: (prefix.init(key, params, config=model_config), params)),
      (lambda t, f: prefix.merge(f, t)),
      prefix.model_config(model_config),
    )
  if mode != "lora":
    raise ValueError(
      f"peft={mode!r} for a causal LM task; use 'full', 'lora' or 'prefix'."
    )
  lora = stacked_lora(config)
  return (
    (lambda key: (lora.init(key, params), params)),
    (lambda t, f: lora.merge(f, t)),
    model_config,
  )


@dataclasses.dataclass
class LMTask(Task):
  """A generation or multiple-choice task: the loss is the teacher-forced
  loss of each example's answer (or gold candidate)."""

  lm_loss: object = None

  def batched_loss(self, trainable, frozen, batch):
    inputs, _ = batch
    return self.lm_loss(trainable, frozen, inputs)


def _qa_evaluate(config, task, examples, tokenizer, model, merged, kw):
  """``(trainable, frozen) -> {test_f1, test_exact_match}``: MeZO's
  evaluation of SQuAD / DROP (:mod:`zoprivacy.metrics.qa_generation`): greedy
  decoding with the key/value cache of at most ``max_new_tokens`` (50)
  tokens after the prompt (left-truncated to ``max_length`` and to the
  positions the model has), scored with SQuAD's normalized F1 and exact
  match, the maximum over the gold answers."""
  new_tokens = int(config.get("max_new_tokens") or 50)
  positions = model.config.max_position_embeddings - new_tokens
  if positions < 8:
    raise ValueError(
      f"max_new_tokens={new_tokens} leaves {positions} of the model's "
      f"{model.config.max_position_embeddings} positions for the prompt."
    )
  merge = jax.jit(merged)

  def evaluate(trainable, frozen):
    scores = qa_generation.evaluate_generation(
      merge(trainable, frozen),
      task,
      examples,
      tokenizer,
      model=model,
      prompt_length=min(kw["max_length"], positions),
      max_new_tokens=new_tokens,
      batch_size=int(config.get("eval_batch_size") or 8),
      pad_id=kw["pad_id"],
    )
    return {"test_f1": scores["f1"], "test_exact_match": scores["exact_match"]}

  return evaluate


class _LM(NamedTuple):
  """What both task kinds take from the model: the trainable/frozen split
  and its merge, the module, the tokenizer, the per-example loss and its
  in-scan variant (None where the model has none), the batch encoding's
  keywords, the sequence length and the export (:func:`exporter`)."""

  init: Any
  merged: Callable
  model: Any
  tok: Any
  loss: Callable
  in_scan: Callable | None
  kw: dict
  length: int
  export: Callable | None = None


def task_with_model(config, loaded) -> Task:
  """``config``'s task (``config.dataset``, one of the ``<name>_opt``
  tasks) on ``loaded`` = ``(model class, model config, params,
  tokenizer)`` instead of the weights in ``config.model_dir``: e.g. the
  shapes of a model too large to load (``jax.ShapeDtypeStruct`` params,
  stored in their dtype), whose step
  :func:`experiments.run.step_program.lowered` compiles. The data and the
  files are read and checked as for a run."""
  name = config.dataset.removesuffix("_opt")
  if name not in prompts.TEMPLATES or name == config.dataset:
    raise ValueError(f"{config.dataset!r} is not a causal LM task.")
  return _build(config, name, loaded)


def _build(config, task: str, loaded=None) -> Task:
  train, test = _sample(config, task)
  model_class, cfg, params, tok = loaded or _causal_lm(config)
  length = int(config.get("max_length") or 256)
  init, merged, model_cfg = _fine_tuning(config, params, cfg)
  if (config.get("peft") or "full") != "full":
    init = _float32_adapters(init)
  model = model_class(model_cfg)

  pad_id = cfg.pad_token_id
  lm = _LM(
    init=init,
    merged=merged,
    model=model,
    tok=tok,
    loss=functools.partial(per_example_lm_loss, model=model),
    # The same losses with the perturbation added inside the layer scan.
    in_scan=functools.partial(
      causal_lm_zo.perturbed_lm_loss, model=model, assemble=merged
    ),
    kw=dict(
      max_length=length,
      pad_id=tok.padding["pad_id"] if pad_id is None else pad_id,
    ),
    length=length,
    export=exporter(config, cfg, merged, tok),
  )
  if task in prompts.GENERATION_TASKS:
    return _generation_task(config, task, train, test, lm)
  if task in prompts.CHOICE_TASKS:
    return _choice_task(config, task, train, test, lm)
  return _classification_task(task, train, test, lm)


def _sample(config, task: str):
  """The task's train and test examples: ``examples_per_class`` per class
  (classification) or ``num_train``; ``num_eval`` test examples."""
  k = int(config.get("examples_per_class") or 0)
  if k and not prompts.TEMPLATES[task].verbalizer:
    raise ValueError(
      f"examples_per_class={k} for {task}_opt: only a classification task "
      "has classes to sample per class; set num_train (MeZO: 1000) instead."
    )
  train, test = llm_data.read_data(llm_data.check_files(config, task), task)
  seed = data_seed(config)
  if k:
    train = mt.sample_per_class(train, k, seed=seed)
  else:
    train = mt.sample_examples(
      train, int(config.get("num_train") or 1000), seed=seed
    )
  test = mt.sample_examples(
    test, int(config.get("num_eval") or 1000), seed=seed + 1
  )
  return train, test


def _lm_task(enc, lm: _LM, loss, in_scan, **fields) -> LMTask:
  """The task trained on the teacher-forced ``loss`` of ``enc``'s train and
  test sequences (one per example; the labels are placeholders)."""
  merged = lm.merged
  return LMTask(
    enc[0],
    np.zeros(len(enc[0]["input_ids"]), np.int32),
    enc[1],
    np.zeros(len(enc[1]["input_ids"]), np.int32),
    1,
    lm.init,
    lambda t, f, x: -loss(merged(t, f), x)[:, None],
    perturbed_loss=in_scan and (lambda t, f, b, u: in_scan(t, f, b[0], u)),
    lm_loss=lambda t, f, x: loss(merged(t, f), x),
    export=lm.export,
    **fields,
  )


def _encode(task: str, train, test, lm: _LM) -> list[dict]:
  return [
    prompts.training_batch(task, d, lm.tok, **lm.kw) for d in (train, test)
  ]


def _generation_task(config, task: str, train, test, lm: _LM) -> LMTask:
  """A question-answering task: trained on the answer's tokens, evaluated
  by generation (F1 and exact match)."""
  return _lm_task(
    _encode(task, train, test, lm),
    lm,
    lm.loss,
    lm.in_scan,
    evaluate=_qa_evaluate(
      config, task, test, lm.tok, lm.model, lm.merged, lm.kw
    ),
    metric_names=("test_f1", "test_exact_match"),
  )


def _choice_task(config, task: str, train, test, lm: _LM) -> LMTask:
  """A multiple-choice task (COPA, ReCoRD): trained, as MeZO trains it, on
  the teacher-forced loss of the gold candidate's tokens; evaluated by the
  accuracy of its best-scoring candidate
  (:mod:`experiments.tasks.llm_choice`), ``eval_batch_size`` (64)
  candidate rows per forward pass."""
  enc = _encode(task, train, test, lm)
  rows, owners = llm_choice.encode_candidates(task, test, lm.tok, **lm.kw)
  window = answer_window(
    np.concatenate([enc[0]["loss_mask"], rows["loss_mask"]])
  )
  loss = functools.partial(lm.loss, answer_window=window)
  merged = lm.merged
  evaluate = llm_choice.choice_evaluate(
    lambda t, f, x: -loss(merged(t, f), x),
    task,
    test,
    rows,
    owners,
    int(config.get("eval_batch_size") or 64),
  )
  in_scan = functools.partial(lm.in_scan, answer_window=window)
  return _lm_task(
    enc,
    lm,
    loss,
    in_scan,
    evaluate=evaluate,
    chance_accuracy=llm_choice.chance_accuracy(task, test),
  )


def _classification_task(task: str, train, test, lm: _LM) -> Task:
  """A prompt classification task: each example's logits are minus the
  loss of its candidate completions, one per verbalizer."""
  c, length, merged = (
    len(prompts.TEMPLATES[task].verbalizer),
    lm.length,
    lm.merged,
  )

  def encode(d):
    b = prompts.candidate_batch(task, d, lm.tok, **lm.kw)
    return {k: v.reshape(len(d), c, length) for k, v in b.items()}

  train_inputs, test_inputs = encode(train), encode(test)
  # The scored tokens are the verbalizers' (public, a few tokens): the LM
  # head runs on that window only, not on all max_length positions.
  window = answer_window(
    np.concatenate([train_inputs["loss_mask"], test_inputs["loss_mask"]])
  )
  loss = functools.partial(lm.loss, answer_window=window)
  in_scan = lm.in_scan
  if in_scan is not None:
    in_scan = functools.partial(in_scan, answer_window=window)

  def flatten(inputs):
    return {k: jnp.reshape(v, (-1, length)) for k, v in inputs.items()}

  def apply(t, f, inputs):
    return -loss(merged(t, f), flatten(inputs)).reshape(-1, c)

  def perturbed_loss(t, f, batch, perturbation):
    inputs, labels = batch
    logits = -in_scan(t, f, flatten(inputs), perturbation).reshape(-1, c)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels)

  return Task(
    train_inputs,
    np.array([e["label"] for e in train], np.int32),
    test_inputs,
    np.array([e["label"] for e in test], np.int32),
    c,
    lm.init,
    apply,
    perturbed_loss=perturbed_loss if in_scan is not None else None,
    export=lm.export,
  )


# The config fields every "<template>_opt" task reads.
FIELDS = (
  "model_dir",
  "model_family",
  "param_dtype",
  "peft",
  "num_prefix_tokens",
  *LORA_FIELDS,
  "max_new_tokens",
  "eval_batch_size",
  "max_length",
  "num_train",
  "num_eval",
)
for _name in tuple(prompts.TEMPLATES):
  register(f"{_name}_opt", fields=FIELDS)(functools.partial(_build, task=_name))
