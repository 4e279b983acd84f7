"""Every OPT config of the DP-ZO / DPZero tables is valid and, with no data
or weights, stops at once naming the files to download."""

import importlib
import time

import pytest

from experiments.run import train
from zoprivacy.data.loaders import MissingDataError

CONFIGS = (
  "dpzo_table1_opt13b_lora",
  "dpzo_table2_opt_squad",
  "dpzo_table3_laplace_squad",
  "dpzero_table4_5_opt",
)


@pytest.mark.parametrize("name", CONFIGS)
def test_llm_config_fails_fast_naming_the_files(name, tmp_path):
  config = importlib.import_module(f"configs.{name}").get_config()
  assert "Table" in importlib.import_module(f"configs.{name}").__doc__
  config.data_dir = str(tmp_path)
  start = time.time()
  with pytest.raises(MissingDataError) as err:
    train.train(config, progress=False)
  assert time.time() - start < 30
  message = str(err.value)
  assert "How to obtain" in message or "download" in message.lower()
  assert str(tmp_path) in message or "json" in message


def test_with_data_present_the_missing_weights_are_named(tmp_path):
  config = importlib.import_module("configs.dpzero_table4_5_opt").get_config()
  (tmp_path / "sst2").mkdir()
  for split in ("train", "validation"):
    (tmp_path / "sst2" / f"{split}.jsonl").write_text(
      '{"sentence": "a fine film", "label": 1, "idx": 0}\n'
    )
  config.data_dir = str(tmp_path)
  config.model_dir = str(tmp_path / "opt-1.3b")
  with pytest.raises(MissingDataError, match="config.json") as err:
    train.train(config, progress=False)
  assert "facebook/opt" in str(err.value)
