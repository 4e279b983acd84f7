"""The shared Hugging Face config reader: checks and field filtering."""

import dataclasses
import json

import pytest

from zoprivacy.models import hf_config
from zoprivacy.models.opt import OPTConfig


@dataclasses.dataclass(frozen=True)
class _Tiny:
  hidden_size: int = 4
  vocab_size: int = 8


def test_as_dict_reads_a_folder_a_file_and_copies_a_mapping(tmp_path):
  (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 6}))
  assert hf_config.as_dict(tmp_path) == {"hidden_size": 6}
  assert hf_config.as_dict(tmp_path / "config.json") == {"hidden_size": 6}
  source = {"hidden_size": 6}
  copy = hf_config.as_dict(source)
  copy["hidden_size"] = 7
  assert source == {"hidden_size": 6}


def test_require_uses_the_default_when_absent_and_names_the_key():
  hf_config.require({}, "hidden_act", "gelu", ("gelu",))
  hf_config.require({"hidden_act": "gelu"}, "hidden_act", "gelu", ("gelu",))
  with pytest.raises(ValueError, match=r"hidden_act 'relu' is not supported"):
    hf_config.require({"hidden_act": "relu"}, "hidden_act", "gelu", ("gelu",))
  with pytest.raises(ValueError, match=r"hidden_act 'silu'"):
    hf_config.require({}, "hidden_act", "silu", ("gelu",))


def test_config_from_dict_keeps_only_the_dataclass_fields():
  made = hf_config.config_from_dict(
    _Tiny, {"hidden_size": 16, "architectures": ["X"], "torch_dtype": "f16"}
  )
  assert made == _Tiny(hidden_size=16, vocab_size=8)


def test_opt_refuses_another_model_type():
  with pytest.raises(ValueError, match=r"model_type 'gpt2' is not supported"):
    OPTConfig.from_hf({"model_type": "gpt2"})
