"""Fine-tuned models written as Hugging Face folders (hf_export): read back
by the project's loaders they give the same parameters and logits; read by
transformers (and peft) they gave the logits committed in
``fixtures/export_reference`` (``fixtures/make_export_reference.py``); the
PEFT adapter is the merged model's difference; a GGUF-loaded model is
written in Hugging Face's layout."""

import json

import export_cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tiny_gguf
from safetensors.numpy import load_file

from zoprivacy.models import gguf_checkpoint, hf_export
from zoprivacy.models.hf_checkpoint import SafetensorsCheckpoint, load_opt
from zoprivacy.models.hf_llama import load_llama
from zoprivacy.models.llama import LlamaForCausalLM
from zoprivacy.models.opt import OPTForCausalLM

pytest.importorskip("gguf", reason="needs gguf (pip install gguf)")
REFERENCE = np.load(export_cases.FIXTURES / "export_reference" / "logits.npz")
IDS = jnp.asarray(export_cases.INPUT_IDS)


def _logits(model_class, config, params):
  apply = jax.jit(lambda p: model_class(config).apply({"params": p}, IDS))
  return np.asarray(apply(params))


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
  return export_cases.write_cases(tmp_path_factory.mktemp("export"))


def test_exports_read_back_give_the_same_parameters_and_logits(cases):
  config, base, adapters = export_cases.opt_lora()
  merged = export_cases.LORA.merge(base, adapters)
  read_config, read = load_opt(cases["opt_lora"])
  assert read_config == config
  jax.tree.map(np.testing.assert_array_equal, read, merged)
  opt_logits = _logits(OPTForCausalLM, config, merged)
  np.testing.assert_allclose(
    _logits(OPTForCausalLM, read_config, read), opt_logits, atol=1e-4
  )
  # Fine-tuned: the logits moved away from the pretrained model's.
  assert np.abs(opt_logits - _logits(OPTForCausalLM, config, base)).max() > 0.1
  config, params = export_cases.smollm2_full(cases["smollm2_full"].parent)
  read_config, read = load_llama(cases["smollm2_full"])
  assert (
    read_config.tie_word_embeddings and read_config.num_key_value_heads == 2
  )
  jax.tree.map(np.testing.assert_array_equal, read, params)
  np.testing.assert_allclose(
    _logits(LlamaForCausalLM, read_config, read),
    _logits(LlamaForCausalLM, config, params),
    atol=1e-4,
  )


def test_exports_give_the_logits_transformers_computed(cases):
  assert "transformers" in str(REFERENCE["versions"])
  np.testing.assert_array_equal(REFERENCE["input_ids"], export_cases.INPUT_IDS)
  config, read = load_opt(cases["opt_lora"])
  ours = _logits(OPTForCausalLM, config, read)
  np.testing.assert_allclose(ours, REFERENCE["opt_lora"], atol=1e-4)
  # peft's base + adapter computes the merged model.
  np.testing.assert_allclose(ours, REFERENCE["opt_lora_adapter"], atol=1e-4)
  config, read = load_llama(cases["smollm2_full"])
  np.testing.assert_allclose(
    _logits(LlamaForCausalLM, config, read),
    REFERENCE["smollm2_full"],
    atol=1e-4,
  )


def test_the_adapter_is_peft_lora_of_the_merged_weights(cases):
  folder = cases["opt_lora_adapter"]
  settings = json.loads((folder / hf_export.ADAPTER_CONFIG).read_text())
  assert settings["peft_type"] == "LORA" and settings["r"] == 4
  assert settings["lora_alpha"] == 8.0 and not settings["fan_in_fan_out"]
  assert "model.decoder.layers.1.fc2" in settings["target_modules"]
  assert len(settings["target_modules"]) == 6  # 3 modules x 2 layers
  adapter = load_file(str(folder / hf_export.ADAPTER_FILE))
  base = SafetensorsCheckpoint(export_cases.TINY_OPT)
  merged = SafetensorsCheckpoint(cases["opt_lora"])
  for module in settings["target_modules"]:
    a = adapter[f"base_model.model.{module}.lora_A.weight"]
    b = adapter[f"base_model.model.{module}.lora_B.weight"]
    assert a.shape[0] == 4 and b.shape[1] == 4  # [r, in], [out, r]
    weight = base[f"{module}.weight"] + 2.0 * b @ a
    np.testing.assert_allclose(
      weight, merged[f"{module}.weight"], rtol=1e-6, atol=1e-6
    )
    assert np.abs(b @ a).max() > 0.01


def test_a_gguf_model_is_written_in_hugging_face_layout(tmp_path):
  # The float32 GGUF file holds the fixture's weights with query and key
  # rows permuted (llama.cpp); the export holds the fixture's rows again.
  path = tmp_path / "tiny.gguf"
  tiny_gguf.write_tiny_gguf(path)
  config, params = gguf_checkpoint.load_gguf_llama(path)
  tensors = hf_export.hf_tensors(params, config)
  _, fixture = tiny_gguf.hf_tensors()
  assert set(tensors) == set(fixture)
  for name, value in fixture.items():
    np.testing.assert_array_equal(tensors[name], value, err_msg=name)
  q = "model.layers.0.self_attn.q_proj.weight"
  assert not np.array_equal(tiny_gguf.permute(fixture[q], 4), fixture[q])


def test_shards_and_16_bit_weights(tmp_path):
  config, params = load_opt(export_cases.TINY_OPT)
  params = export_cases.changed(params)
  written = hf_export.save_model(
    tmp_path / "s", params, config, shard_bytes=2**17
  )
  index = json.loads((tmp_path / "s" / hf_export.INDEX_FILE).read_text())
  shards = set(index["weight_map"].values())
  assert len(shards) > 2 and {p.name for p in written} >= shards
  _, read = load_opt(tmp_path / "s")
  jax.tree.map(np.testing.assert_array_equal, read, params)
  hf_export.save_model(tmp_path / "b", params, config, dtype="bfloat16")
  assert (
    json.loads((tmp_path / "b" / "config.json").read_text())["torch_dtype"]
    == "bfloat16"
  )
  _, read = load_opt(tmp_path / "b", param_dtype=jnp.bfloat16)
  rounded = jax.tree.map(lambda x: x.astype(jnp.bfloat16), params)
  jax.tree.map(np.testing.assert_array_equal, read, rounded)


def test_a_prefix_tuned_model_is_refused():
  config, _ = load_opt(export_cases.TINY_OPT)
  prefixed = type(config)(**{**config.__dict__, "num_prefix_tokens": 5})
  with pytest.raises(ValueError, match="prefix"):
    hf_export.hf_config(prefixed)


@pytest.mark.parametrize("name", ["tiny_opt", "tiny_llama", "tiny_mistral"])
def test_checkpoints_are_written_back_as_transformers_wrote_them(
  name, tmp_path
):
  # The fixtures were saved by transformers: OPT (tied head), Llama (an
  # untied lm_head), Mistral (a sliding window, tied).
  source = export_cases.FIXTURES / name
  load = load_opt if name == "tiny_opt" else load_llama
  config, params = load(source)
  hf_export.save_model(tmp_path, params, config)
  original, written = (
    SafetensorsCheckpoint(source),
    SafetensorsCheckpoint(tmp_path),
  )
  assert written.names == original.names
  for tensor in written.names:
    np.testing.assert_array_equal(written[tensor], original[tensor])
  settings = json.loads((tmp_path / "config.json").read_text())
  hf = json.loads((source / "config.json").read_text())
  for key in ("architectures", "model_type", "tie_word_embeddings"):
    assert settings[key] == hf[key], key
  assert settings.get("sliding_window") == hf.get("sliding_window")
  assert load(tmp_path)[0] == config
