"""The data files of the causal-LM tasks: where they are looked for,
checked before anything loads, and read.

Under ``config.data_dir``:

* classification and multiple choice: ``<task>/train.*`` and
  ``<task>/validation.*`` (``.jsonl``, ``.parquet``, ``.tsv`` or ``.json``:
  Hugging Face exports, GLUE TSVs renamed); for the SuperGLUE tasks, their
  release's own folder is read too: ``BoolQ/``, ``CB/``, ``COPA/``, ``RTE/``,
  ``WSC/``, ``WiC/``, ``MultiRC/``, ``ReCoRD/`` with ``train.jsonl`` and
  ``val.jsonl`` (:mod:`zoprivacy.data.loaders.superglue`);
* ``squad/train-v1.1.json`` + ``squad/dev-v1.1.json``;
  ``drop/drop_dataset_train.json`` + ``drop/drop_dataset_dev.json``.

A missing file and a missing checkpoint file are named together, in one
:class:`~zoprivacy.data.loaders.MissingDataError`, before anything is read.
"""

from __future__ import annotations

from pathlib import Path

from experiments.tasks import llm_files
from zoprivacy.data.loaders import MissingDataError, superglue
from zoprivacy.data.loaders import mezo_tasks as mt

DATA_HOW = (
  "export the Hugging Face dataset splits (to_json / to_parquet; glue/sst2, "
  "SetFit/sst5, super_glue/rte, glue/qnli, glue/mnli (validation_matched), "
  "snli, super_glue/boolq, trec, super_glue/{cb,copa,wsc.fixed,wic,multirc,"
  "record}) as <data_dir>/<task>/{train,validation}.jsonl, or unzip "
  "SuperGLUE's release (its BoolQ/, CB/, COPA/, RTE/, WSC/, WiC/, MultiRC/, "
  "ReCoRD/ folders with train.jsonl and val.jsonl) into <data_dir>; SQuAD "
  "v1.1 and DROP in their original JSON"
)
SUFFIXES = (".jsonl", ".parquet", ".tsv", ".json")
# The evaluation split's file: Hugging Face's name, SuperGLUE's, GLUE's.
EVAL_STEMS = ("validation", "val", "dev")
GENERATION_FILES = {
  "squad": ("squad/train-v1.1.json", "squad/dev-v1.1.json"),
  "drop": ("drop/drop_dataset_train.json", "drop/drop_dataset_dev.json"),
}


def _find(root: Path, stems) -> Path | None:
  for stem in stems:
    for s in SUFFIXES:
      if (root / f"{stem}{s}").is_file():
        return root / f"{stem}{s}"
  return None


def data_files(data_dir: Path, task: str) -> tuple[list, list]:
  """``(files, missing)``: the task's train and evaluation files, from the
  first folder that has both (``<task>/``, then SuperGLUE's folder)."""
  if task in GENERATION_FILES:
    files = [data_dir / n for n in GENERATION_FILES[task]]
    return files, [p for p in files if not p.is_file()]
  folders = [data_dir / task]
  if task in superglue.FOLDERS:
    folders.append(data_dir / superglue.FOLDERS[task])
  for root in folders:
    files = [_find(root, ("train",)), _find(root, EVAL_STEMS)]
    if None not in files:
      return files, []
  files = [_find(folders[0], ("train",)), _find(folders[0], EVAL_STEMS)]
  stems = ("train", "validation")
  missing = [
    folders[0] / f"{s}.jsonl" for s, f in zip(stems, files) if f is None
  ]
  return files, missing


def check_files(config, task: str) -> list:
  """The data files of ``task``, after checking that they and every file
  of the checkpoint folder exist (:mod:`experiments.tasks.llm_files`):
  else one :class:`MissingDataError` naming all that is missing, before
  anything is read."""
  data_dir = Path(config.get("data_dir") or ".").expanduser()
  files, missing_data = data_files(data_dir, task)
  if not config.get("data_dir"):
    missing_data = [f"<config.data_dir>/{p}" for p in missing_data]
  what, missing_model, how = llm_files.missing_model_files(config)
  if missing_model and missing_data:
    raise MissingDataError(
      f"{what} and the {task} data",
      missing_model + missing_data,
      f"{how} For the data: {DATA_HOW}.",
    )
  if missing_model:
    raise MissingDataError(what, missing_model, how)
  if missing_data:
    raise MissingDataError(task, missing_data, DATA_HOW)
  return files


def read_data(files, task: str) -> list[list[dict]]:
  """``[train, evaluation]`` examples of ``task`` from its files."""
  if task in GENERATION_FILES:
    read = mt.load_squad_json if task == "squad" else mt.load_drop_json
    return [read(p) for p in files]
  if task in superglue.TASKS:
    return [superglue.normalize(task, mt.read_records(f)) for f in files]
  return [mt.normalize_classification(task, mt.read_records(f)) for f in files]
