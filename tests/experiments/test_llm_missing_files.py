"""Every language-model config, with its checkpoint folder unset, empty or
partial, stops in under 2 s before any weight is read, with one paragraph
naming the model family, the folder, each missing file and where to get
them; a user error, so the command prints no traceback."""

import importlib
import json
import pathlib
import shutil
import time

import pytest

from experiments.run import errors, train
from experiments.tasks import llm
from zoprivacy.models import hf_checkpoint, hf_llama

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures"
CONFIGS = (
  "dpzero_table4_5_opt",
  "dpzo_table1_opt13b_lora",
  "dpzo_table2_opt_squad",
  "dpzo_table3_laplace_squad",
  "dpzo_table4_mistral",
  "opt_llm",
  "tiny_opt_sst2",
  "tiny_opt_squad",
)
WEIGHTS = "model.safetensors"
TOKENIZER = (
  "tokenizer.json",
  "tokenizer_config.json",
  "vocab.json",
  "merges.txt",
)


def _config(name):
  config = importlib.import_module(f"configs.{name}").get_config()
  data = (
    "squad_synthetic" if config.dataset == "squad_opt" else "sst2_synthetic"
  )
  config.data_dir = str(FIXTURES / data)  # present: the model is the subject
  family = "mistral" if "mistral" in name else "opt"
  return config, family


def _no_weight_loading(monkeypatch):
  def refuse(*args, **kwargs):
    raise AssertionError("weights were read before the files were checked")

  monkeypatch.setattr(hf_checkpoint, "load_opt", refuse)
  monkeypatch.setattr(hf_llama, "load_llama", refuse)


def _fails_fast(config):
  start = time.perf_counter()
  with pytest.raises(errors.USER_ERRORS) as err:
    train.train(config, progress=False)
  seconds = time.perf_counter() - start
  assert seconds < 2.0, seconds
  message = errors.one_paragraph(err.value)
  assert "\n\n" not in message and "Traceback" not in message
  return " ".join(message.split())  # the head line is wrapped


def _names_the_family(message, family):
  if family == "mistral":
    assert "Mistral" in message and "mistralai/Mistral-7B" in message
    assert "OPT" not in message and "facebook/opt" not in message
  else:
    assert "OPT checkpoint" in message and "facebook/opt" in message
  assert "huggingface.co/" in message and "config.model_dir" in message


@pytest.mark.parametrize("name", CONFIGS)
def test_unset_model_dir(name, monkeypatch):
  config, family = _config(name)
  config.model_dir = ""
  _no_weight_loading(monkeypatch)
  message = _fails_fast(config)
  _names_the_family(message, family)
  assert "config.model_dir is not set" in message
  for f in ("config.json", WEIGHTS, "tokenizer.json"):
    assert f"<config.model_dir>/{f}" in message


@pytest.mark.parametrize("name", CONFIGS)
def test_empty_folder(name, tmp_path, monkeypatch):
  config, family = _config(name)
  folder = tmp_path / ("Mistral-7B-v0.1" if family == "mistral" else "opt")
  folder.mkdir()
  config.model_dir = str(folder)
  _no_weight_loading(monkeypatch)
  message = _fails_fast(config)
  _names_the_family(message, family)
  for f in ("config.json", WEIGHTS, "tokenizer.json"):
    assert str(folder / f) in message


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize(
  "keep", ["config", "config+weights", "config+tokenizer"]
)
def test_partial_folder(name, keep, tmp_path, monkeypatch):
  """config.json present (its model_type names the family), and the weights
  or the tokenizer missing: the missing ones are named, the tokenizer is
  checked before any weight is loaded."""
  config, family = _config(name)
  source = FIXTURES / ("tiny_mistral" if family == "mistral" else "tiny_opt")
  folder = tmp_path / "checkpoint"  # a neutral name: config.json decides
  folder.mkdir()
  shutil.copy(source / "config.json", folder)
  if "weights" in keep:
    shutil.copy(source / WEIGHTS, folder)
  if "tokenizer" in keep:
    for f in TOKENIZER:
      if (source / f).is_file():
        shutil.copy(source / f, folder)
  config.model_dir = str(folder)
  _no_weight_loading(monkeypatch)
  message = _fails_fast(config)
  _names_the_family(message, family)
  assert (str(folder / WEIGHTS) in message) == ("weights" not in keep)
  assert (str(folder / "tokenizer.json") in message) == (
    "tokenizer" not in keep
  )
  assert str(folder / "config.json") not in message


def test_sharded_index_names_each_missing_shard(tmp_path):
  folder = tmp_path / "opt"
  folder.mkdir()
  for f in ("config.json", "tokenizer.json"):
    shutil.copy(FIXTURES / "tiny_opt" / f, folder)
  shards = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
  weight_map = {f"w{i}": s for i, s in enumerate(shards)}
  (folder / "model.safetensors.index.json").write_text(
    json.dumps({"weight_map": weight_map})
  )
  (folder / shards[1]).write_bytes(b"")
  config, _ = _config("dpzo_table2_opt_squad")
  config.model_dir = str(folder)
  what, missing, how = llm.llm_files.missing_model_files(config)
  assert what == f"OPT checkpoint folder {folder}"
  assert missing == [str(folder / shards[0]), str(folder / shards[2])]


def test_an_unsupported_model_type_is_refused(tmp_path):
  (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')
  config, _ = _config("opt_llm")
  config.model_dir = str(tmp_path)
  with pytest.raises(ValueError, match="model_type 'gpt2' is not a supported"):
    llm.llm_files.missing_model_files(config)


def test_the_library_loader_points_a_mistral_folder_to_mistral(tmp_path):
  shutil.copy(FIXTURES / "tiny_mistral" / "config.json", tmp_path)
  with pytest.raises(FileNotFoundError) as err:
    hf_llama.load_llama(tmp_path)
  assert "mistralai/Mistral-7B" in str(err.value)
  assert "facebook/opt" not in str(err.value)
