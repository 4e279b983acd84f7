"""RoBERTa prompt-based masked-LM classifiers: SST-2, SST-5, MNLI, SNLI, RTE
and TREC (DPZero Table 2, DP-ZO, PAZO Table 4), with MeZO's templates and
label words (``medium_models/run_fewshot.sh``)."""

from __future__ import annotations

import jax

from experiments.tasks.common import (
  data_seed,
  encoded_task,
  public_set_builder,
  require_hf_dir,
  train_eval_split,
)
from experiments.tasks.peft import ENCODER_FIELDS, peft_args, peft_split
from experiments.tasks.registry import register
from experiments.tasks.task import Task
from zoprivacy.data import loaders, tokenize
from zoprivacy.data import splits as splits_lib
from zoprivacy.data.loaders import Dataset, lm_bff
from zoprivacy.data.tokenize import fit_around_mask, label_word_ids, pad_to
from zoprivacy.models import prompt_mlm

# The config fields of the tasks with a public-data option (public_per_class).
WITH_PUBLIC = (*ENCODER_FIELDS, "public_per_class")
ROBERTA_HOW = (
  "put a Hugging Face RoBERTa masked-LM folder (roberta-base or roberta-large: "
  "config.json, model.safetensors with roberta.* and lm_head.* tensors, "
  "tokenizer.json) at config.model_dir, e.g. --config.model_dir=/models/roberta-large"
)


MASK_TOKEN = "<mask>"


def _roberta_prompt_task(
  config, name: str, data, public: Dataset | None, **split
) -> Task:
  model_dir = require_hf_dir(config.get("model_dir"), "RoBERTa", ROBERTA_HOW)
  train, test = train_eval_split(config, data.train, data.test, **split)
  tokenizer, mask_id = _prompt_tokenizer(model_dir)
  rcfg, params = prompt_mlm.load_roberta_mlm(model_dir)
  length = int(config.get("max_length") or 128)
  if length > rcfg.max_position_embeddings - rcfg.pad_token_id - 1:
    raise ValueError(f"max_length={length} exceeds the model's positions")
  model = prompt_mlm.prompt_classifier(
    rcfg, label_word_ids(tokenizer, loaders.LABEL_WORDS[name]), mask_id
  )

  def encode(ds):
    prompts = loaders.prompts_for(name, ds.inputs, MASK_TOKEN)
    rows = [
      fit_around_mask(e.ids, length, mask_id)
      for e in tokenizer.encode_batch(prompts)
    ]
    ids, mask = pad_to(rows, length, rcfg.pad_token_id)
    return {"input_ids": ids, "attention_mask": mask}

  init, apply = _prompt_model(config, model, params)
  return encoded_task(train, test, public, encode, init, apply)


def _prompt_tokenizer(model_dir):
  """The model's tokenizer (no truncation or padding) and its mask id."""
  tokenizer = tokenize.load_tokenizer(model_dir)
  tokenizer.no_truncation()
  tokenizer.no_padding()
  mask_id = tokenizer.token_to_id(MASK_TOKEN)
  if mask_id is None:
    raise ValueError(f"{model_dir}/tokenizer.json has no {MASK_TOKEN} token")
  return tokenizer, mask_id


def _prompt_model(config, model, params):
  """The task's ``init`` and ``apply`` for ``config.peft``'s split of the
  encoder and RoBERTa's own pretrained LM head (the prompt classifier's
  "head")."""
  params = {
    "encoder": params["encoder"],
    "lm_head": params["lm_head"],
    "lm_bias": params["lm_bias"],
  }
  mode = config.get("peft") or "full"
  trainable, frozen, merge = peft_split(
    params,
    mode,
    jax.random.key(data_seed(config) + 3),
    head_keys=("lm_head", "lm_bias"),
    **peft_args(config),
  )

  def init(key):
    del key  # pretrained weights; LoRA adapters were drawn from the data seed
    return trainable, frozen

  def apply(t, f, inputs):
    return model.apply(
      {"params": merge(t, f)},
      inputs["input_ids"],
      inputs["attention_mask"],
    )

  return init, apply


@register("sst2", fields=WITH_PUBLIC)
def sst2_task(config) -> Task:
  """DPZero / DP-ZO SST-2 with RoBERTa: ``<sentence> It was<mask>.``, label
  words `` terrible`` / `` great``."""
  return _roberta_prompt_task(
    config, "sst2", loaders.load_sst2(config.get("data_dir") or None), None
  )


@register("mnli", fields=WITH_PUBLIC, public_splits=("snli",))
def mnli_task(config) -> Task:
  """PAZO Table 4 / DPZero MNLI with RoBERTa: ``premise?<mask>, hypothesis``,
  label words `` Yes`` / `` Maybe`` / `` No``; ``public="snli"`` draws
  ``public_per_class`` (100) SNLI training pairs per class."""
  data = loaders.load_mnli(config.get("data_dir") or None)
  pool, public = snli_public(config, data.train)
  return _roberta_prompt_task(
    config, "mnli", loaders.DatasetSplits(pool, data.test), public
  )


@public_set_builder
def snli_public(config, pool: Dataset) -> tuple[Dataset, Dataset | None]:
  """``(private, public)``: ``public_per_class`` (100) SNLI training pairs
  per class, a function of SNLI and the data seed alone, and the MNLI
  ``pool`` without any pair that duplicates one of them (``public`` None
  without ``config.public``)."""
  if not config.get("public"):
    return pool, None
  if config.public != "snli":
    raise ValueError(f"public={config.public!r} for mnli; use 'snli' or ''")
  split = splits_lib.ood_public_split(
    loaders.load_snli(config.get("data_dir") or None).train,
    pool,
    per_class=int(config.get("public_per_class") or 100),
    seed=data_seed(config),
    on_overlap="drop",
  )
  return split.private, split.public


@register("snli", fields=WITH_PUBLIC)
def snli_task(config) -> Task:
  """DPZero SNLI with RoBERTa and the MNLI template."""
  return _roberta_prompt_task(
    config, "snli", loaders.load_snli(config.get("data_dir") or None), None
  )


@register("sst5", fields=ENCODER_FIELDS)
def sst5_task(config) -> Task:
  """DPZero SST-5 with RoBERTa (LM-BFF's ``sst-5/{train,test}.csv``):
  ``<sentence> It was<mask>.``, label words `` terrible`` / `` bad`` /
  `` okay`` / `` good`` / `` great``."""
  data = lm_bff.load_sst5(config.get("data_dir") or None)
  return _roberta_prompt_task(config, "sst5", data, None)


@register("rte", fields=ENCODER_FIELDS)
def rte_task(config) -> Task:
  """DPZero RTE with RoBERTa (GLUE's ``RTE/{train,dev}.tsv``; dev is the
  test set): the MNLI template, label words `` Yes`` / `` No``."""
  data = loaders.load_rte(config.get("data_dir") or None)
  return _roberta_prompt_task(config, "rte", data, None)


@register("trec", fields=ENCODER_FIELDS)
def trec_task(config) -> Task:
  """DPZero TREC with RoBERTa (LM-BFF's ``trec/{train,test}.csv`` or TREC's
  release): ``<mask>: <question>``, label words `` Description`` /
  `` Entity`` / `` Expression`` / `` Human`` / `` Location`` / `` Number``.
  ``examples_per_class=k`` takes all of a class with fewer than ``k``
  training questions, as LM-BFF's k-shot sampler does (ABBR has 86: at
  ``k = 512`` the training set is ``5 * 512 + 86 = 2,646``)."""
  data = lm_bff.load_trec(config.get("data_dir") or None)
  return _roberta_prompt_task(
    config, "trec", data, None, few_shot=lm_bff.at_most_k_per_class
  )
