"""Sentence(-pair) classification tasks in their distributed file formats:
MNLI, SST-2 and RTE as GLUE TSV files, SNLI as its original jsonl/txt release.

Paper settings served:

* PAZO setting (4): RoBERTa-base prompt-based fine-tuning on MNLI, few-shot with
  512 training examples per class (``zoprivacy.data.splits.few_shot_subsample``),
  SNLI (100 per class) as out-of-distribution public data.
* DPZero / DP-ZO: RoBERTa-large prompt fine-tuning on SST-2 and MNLI/SNLI
  (MeZO's few-shot protocol; SST-2 also as a DP-ZO OPT task).

Expected layouts::

    MNLI/train.tsv, MNLI/dev_matched.tsv[, MNLI/dev_mismatched.tsv]
        header: index promptID pairID genre sentence1_binary_parse sentence2_binary_parse
                sentence1_parse sentence2_parse sentence1 sentence2 label1 [label2..label5]
                gold_label
    SST-2/train.tsv, SST-2/dev.tsv          header: sentence<TAB>label (0 neg, 1 pos)
    RTE/train.tsv, RTE/dev.tsv              header: index sentence1 sentence2 label
    snli_1.0/snli_1.0_{train,dev,test}.jsonl  (keys gold_label, sentence1, sentence2), or
    snli_1.0/snli_1.0_{train,dev,test}.txt    (TSV with the same column names)

NLI labels use the GLUE / Hugging Face order: 0 entailment, 1 neutral,
2 contradiction, so SNLI can serve as public data for MNLI. Pairs with no gold
label (``-``) are dropped. Inputs are ``[N, 2]`` object arrays (premise, hypothesis).
TSV fields are split on tabs only: GLUE files contain unbalanced quote characters.
"""

from __future__ import annotations

import json
from pathlib import Path

from zoprivacy.data.loaders import base

NLI_CLASS_NAMES = ("entailment", "neutral", "contradiction")
NLI_LABELS = {n: i for i, n in enumerate(NLI_CLASS_NAMES)}
SST2_CLASS_NAMES = ("negative", "positive")
GLUE_INSTRUCTIONS = (
  "download the GLUE data (e.g. `python download_glue_data.py --tasks {task}` from "
  "https://gist.github.com/W4ngatang/60c2bdb54d156a41194446737ce03e2e, or "
  "https://dl.fbaipublicfiles.com/glue/data/{zip}) and extract it, creating {task}/"
)
SNLI_INSTRUCTIONS = (
  "download https://nlp.stanford.edu/projects/snli/snli_1.0.zip and unzip it, "
  "creating snli_1.0/"
)


def read_tsv(path: Path) -> tuple[list[str], list[list[str]]]:
  """Reads a header + rows TSV, splitting on tabs only (no quote handling)."""
  with open(path, encoding="utf-8", newline="") as f:
    lines = [l.rstrip("\r\n") for l in f]
  lines = [l for l in lines if l]
  if not lines:
    raise ValueError(f"{path}: empty file")
  header = lines[0].lstrip("\ufeff").split("\t")
  rows = [l.split("\t") for l in lines[1:]]
  for i, r in enumerate(rows, 2):
    if len(r) != len(header):
      raise ValueError(f"{path}:{i}: {len(r)} fields, header has {len(header)}")
  return header, rows


def _column(header: list[str], name: str, path: Path) -> int:
  if name not in header:
    raise ValueError(f"{path}: no column {name!r} in header {header}")
  return header.index(name)


def _nli_from_tsv(
  path: Path, name: str, label_column: str = "gold_label"
) -> base.Dataset:
  header, rows = read_tsv(path)
  s1, s2 = (
    _column(header, "sentence1", path),
    _column(header, "sentence2", path),
  )
  lab = _column(header, label_column, path)
  pairs, labels = [], []
  for r in rows:
    if r[lab] not in NLI_LABELS:
      continue
    pairs.append((r[s1], r[s2]))
    labels.append(NLI_LABELS[r[lab]])
  return base.Dataset(
    base.text_array(pairs), base.as_labels(labels), 3, name, NLI_CLASS_NAMES
  )


def load_mnli(
  data_dir: base.PathLike | None = None, test_split: str = "dev_matched"
) -> base.DatasetSplits:
  """MNLI from GLUE TSVs: ``train.tsv`` and ``test_split`` (``dev_matched`` or
  ``dev_mismatched``; the GLUE test files carry no labels) as the test set."""
  if test_split not in ("dev_matched", "dev_mismatched"):
    raise ValueError(
      f"test_split must be dev_matched or dev_mismatched, got {test_split}"
    )
  root = base.find_dir_with(
    ("train.tsv", f"{test_split}.tsv"),
    base.candidate_dirs("MNLI", data_dir),
    "MNLI",
    GLUE_INSTRUCTIONS.format(task="MNLI", zip="MNLI.zip"),
  )
  return base.DatasetSplits(
    _nli_from_tsv(root / "train.tsv", "mnli/train"),
    _nli_from_tsv(root / f"{test_split}.tsv", f"mnli/{test_split}"),
  )


def _sst2_split(path: Path, name: str) -> base.Dataset:
  header, rows = read_tsv(path)
  s, lab = _column(header, "sentence", path), _column(header, "label", path)
  labels = []
  for i, r in enumerate(rows, 2):
    if r[lab] not in ("0", "1"):
      raise ValueError(f"{path}:{i}: label must be 0 or 1, got {r[lab]!r}")
    labels.append(int(r[lab]))
  return base.Dataset(
    base.text_array([r[s].strip() for r in rows]),
    base.as_labels(labels),
    2,
    name,
    SST2_CLASS_NAMES,
  )


def _train_and_dev(task: str, data_dir, read_split, name: str):
  """GLUE's ``task/train.tsv`` and ``task/dev.tsv`` (the test set: GLUE's
  test files carry no labels), each read by ``read_split(path, name)``."""
  root = base.find_dir_with(
    ("train.tsv", "dev.tsv"),
    base.candidate_dirs(task, data_dir),
    task,
    GLUE_INSTRUCTIONS.format(task=task, zip=f"{task}.zip"),
  )
  return base.DatasetSplits(
    read_split(root / "train.tsv", f"{name}/train"),
    read_split(root / "dev.tsv", f"{name}/dev"),
  )


def load_sst2(data_dir: base.PathLike | None = None) -> base.DatasetSplits:
  """SST-2 from GLUE TSVs: ``train.tsv`` and ``dev.tsv`` (as the test set)."""
  return _train_and_dev("SST-2", data_dir, _sst2_split, "sst2")


def _snli_jsonl(path: Path, name: str) -> base.Dataset:
  pairs, labels = [], []
  with open(path, encoding="utf-8") as f:
    for lineno, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        ex = json.loads(line)
      except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{lineno}: invalid JSON: {e}") from e
      if ex.get("gold_label") not in NLI_LABELS:
        continue
      pairs.append((ex["sentence1"], ex["sentence2"]))
      labels.append(NLI_LABELS[ex["gold_label"]])
  return base.Dataset(
    base.text_array(pairs), base.as_labels(labels), 3, name, NLI_CLASS_NAMES
  )


def load_snli(
  data_dir: base.PathLike | None = None, test_split: str = "test"
) -> base.DatasetSplits:
  """SNLI 1.0 train and ``test_split`` (``test`` or ``dev``); reads the
  ``.jsonl`` files, or the ``.txt`` TSV files when no jsonl is present."""
  if test_split not in ("test", "dev"):
    raise ValueError(f"test_split must be test or dev, got {test_split}")
  dirs = base.candidate_dirs("snli_1.0", data_dir)
  splits = ("train", test_split)
  for ext in ("jsonl", "txt"):
    files = tuple(f"snli_1.0_{s}.{ext}" for s in splits)
    try:
      root = base.find_dir_with(files, dirs, "SNLI", SNLI_INSTRUCTIONS)
    except base.MissingDataError:
      continue
    if ext == "jsonl":
      return base.DatasetSplits(
        *(_snli_jsonl(root / f, f"snli/{s}") for f, s in zip(files, splits))
      )
    return base.DatasetSplits(
      *(_nli_from_tsv(root / f, f"snli/{s}") for f, s in zip(files, splits))
    )
  # Neither format complete: report the jsonl files (the primary format).
  base.find_dir_with(
    tuple(f"snli_1.0_{s}.jsonl" for s in splits),
    dirs,
    "SNLI",
    SNLI_INSTRUCTIONS + " (the .txt TSV files are accepted as well)",
  )
  raise AssertionError("unreachable")


RTE_CLASS_NAMES = ("entailment", "not_entailment")


def _rte_split(path: Path, name: str) -> base.Dataset:
  header, rows = read_tsv(path)
  s1, s2 = (
    _column(header, "sentence1", path),
    _column(header, "sentence2", path),
  )
  lab = _column(header, "label", path)
  labels = []
  for i, r in enumerate(rows, 2):
    if r[lab] not in RTE_CLASS_NAMES:
      raise ValueError(f"{path}:{i}: label {r[lab]!r} not in {RTE_CLASS_NAMES}")
    labels.append(RTE_CLASS_NAMES.index(r[lab]))
  return base.Dataset(
    base.text_array([(r[s1], r[s2]) for r in rows]),
    base.as_labels(labels),
    2,
    name,
    RTE_CLASS_NAMES,
  )


def load_rte(data_dir: base.PathLike | None = None) -> base.DatasetSplits:
  """RTE from GLUE TSVs (``index sentence1 sentence2 label``, labels
  ``entailment`` = 0 / ``not_entailment`` = 1): ``train.tsv`` and
  ``dev.tsv`` (as the test set, as LM-BFF, MeZO and DPZero use it)."""
  return _train_and_dev("RTE", data_dir, _rte_split, "rte")
