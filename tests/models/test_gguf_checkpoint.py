"""The GGUF loader on tiny files written by llama.cpp's own
``gguf.GGUFWriter`` (``tiny_gguf.py``): names, rotary un-permutation,
dequantization, configuration, and the refusals."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tiny_gguf

from zoprivacy.models import gguf_checkpoint
from zoprivacy.models.hf_llama import load_llama
from zoprivacy.models.llama import LlamaForCausalLM

gguf = pytest.importorskip("gguf", reason="needs gguf (pip install gguf)")


@pytest.fixture(scope="module")
def float_file(tmp_path_factory):
  path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
  tiny_gguf.write_tiny_gguf(path)
  return path


def test_float32_file_loads_the_safetensors_weights_exactly(float_file):
  """Every parameter equals the safetensors checkpoint's bit for bit: the
  query rows are un-permuted by the 4 query heads, the key rows by the 2
  key/value heads, the linears transposed and stacked."""
  config, params = gguf_checkpoint.load_gguf_llama(float_file)
  ref_config, ref = load_llama(tiny_gguf.FIXTURE)
  assert (config.num_attention_heads, config.num_key_value_heads) == (4, 2)
  for field in ("hidden_size", "intermediate_size", "num_hidden_layers"):
    assert getattr(config, field) == getattr(ref_config, field)
  assert config.head_dim == 16 and config.vocab_size == 384
  assert config.rope_theta == 10000.0 and not config.tie_word_embeddings
  assert config.rms_norm_eps == pytest.approx(1e-6, rel=1e-6)  # float32
  assert (config.bos_token_id, config.eos_token_id) == (1, 2)
  assert config.pad_token_id == 0
  jax.tree.map(np.testing.assert_array_equal, params, ref)
  ids = jnp.asarray([[5, 9, 200, 31, 7]])
  a = LlamaForCausalLM(config).apply({"params": params}, ids)
  b = LlamaForCausalLM(ref_config).apply({"params": ref}, ids)
  np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_key_rows_need_the_key_value_head_count():
  """The permutation by 2 heads undone by 4 is not the identity: the
  head count of the key projection matters."""
  w = np.arange(32 * 3, dtype=np.float32).reshape(32, 3)
  back = gguf_checkpoint.unpermute_rotary(tiny_gguf.permute(w, 2), 2)
  np.testing.assert_array_equal(back, w)
  wrong = gguf_checkpoint.unpermute_rotary(tiny_gguf.permute(w, 2), 4)
  assert not np.array_equal(wrong, w)


@pytest.mark.parametrize(
  "kind, tol", [("F16", 2e-3), ("BF16", 2e-2), ("Q8_0", 2e-2),
                ("Q5_1", 0.1), ("Q4_0", 0.2), ("Q4_1", 0.2)]
)  # fmt: skip
def test_quantized_tensors_dequantize_as_llama_cpp(tmp_path, kind, tol):
  """Each tensor equals gguf's own dequantization of what was written (un-
  permuted), and is near the float weight within the type's error."""
  path = tmp_path / f"{kind}.gguf"
  config, written = tiny_gguf.write_tiny_gguf(path, default_type=kind)
  ckpt = gguf_checkpoint.GGUFCheckpoint(path)
  hf_name = "model.layers.1.self_attn.k_proj.weight"
  assert ckpt.tensor_type(hf_name) == kind
  w = written["blk.1.attn_k.weight"]
  qtype = gguf.GGMLQuantizationType[kind]
  if kind == "F16":
    expected = w.astype(np.float16).astype(np.float32)
  else:
    expected = gguf.quants.dequantize(gguf.quants.quantize(w, qtype), qtype)
  got = ckpt[hf_name]
  back = gguf_checkpoint.unpermute_rotary(expected, config.num_key_value_heads)
  np.testing.assert_array_equal(got, back)
  original = gguf_checkpoint.unpermute_rotary(w, config.num_key_value_heads)
  assert 0 < np.abs(got - original).max() <= tol * np.abs(w).max()


def test_mixed_types_load_and_run(tmp_path):
  """A Q4_1 file with a Q8_0 embedding and F32 norms, as SmolLM2's: it
  loads, runs, and its logits are near the float model's."""
  path = tmp_path / "mixed.gguf"
  types = {"token_embd.weight": "Q8_0"}
  tiny_gguf.write_tiny_gguf(path, default_type="Q4_1", types=types)
  config, params = gguf_checkpoint.load_gguf_llama(path)
  ref_config, ref = load_llama(tiny_gguf.FIXTURE)
  ids = jnp.asarray([[5, 9, 200, 31, 7]])
  a = np.asarray(LlamaForCausalLM(config).apply({"params": params}, ids))
  b = np.asarray(LlamaForCausalLM(ref_config).apply({"params": ref}, ids))
  assert np.all(np.isfinite(a))
  assert np.corrcoef(a.ravel(), b.ravel())[0, 1] > 0.9


def test_missing_and_foreign_files_are_refused(tmp_path):
  with pytest.raises(FileNotFoundError, match="no such GGUF file"):
    gguf_checkpoint.load_gguf_llama(tmp_path / "none.gguf")
  junk = tmp_path / "junk.gguf"
  junk.write_bytes(b"PK\x03\x04" + bytes(64))
  with pytest.raises(ValueError, match="not a readable GGUF file"):
    gguf_checkpoint.load_gguf_llama(junk)


def test_other_architectures_are_refused(tmp_path):
  path = tmp_path / "gpt2.gguf"
  tiny_gguf.write_tiny_gguf(path, arch="gpt2")
  with pytest.raises(ValueError, match="architecture is 'gpt2'"):
    gguf_checkpoint.load_gguf_llama(path)


def test_unsupported_model_features_are_refused(tmp_path):
  path = tmp_path / "moe.gguf"
  tiny_gguf.write_tiny_gguf(path, metadata=lambda w: w.add_expert_count(8))
  with pytest.raises(ValueError, match="mixture-of-experts"):
    gguf_checkpoint.load_gguf_llama(path)
  path = tmp_path / "yarn.gguf"

  def yarn(writer):
    writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    writer.add_rope_scaling_factor(4.0)

  tiny_gguf.write_tiny_gguf(path, metadata=yarn)
  with pytest.raises(ValueError, match="yarn RoPE scaling"):
    gguf_checkpoint.load_gguf_llama(path)


def test_missing_metadata_is_named(float_file):
  reader = gguf_checkpoint.open_gguf(float_file)
  reader.fields.pop("llama.attention.head_count")
  with pytest.raises(ValueError, match="lacks 'llama.attention.head_count'"):
    gguf_checkpoint.gguf_llama_config(reader, float_file)


def test_missing_unknown_and_unsupported_tensors_are_named(tmp_path):
  path = tmp_path / "missing.gguf"
  tiny_gguf.write_tiny_gguf(path, drop=("blk.1.ffn_up.weight",))
  with pytest.raises(
    ValueError, match="lacks 1 of the 21 tensors.*blk.1.ffn_up"
  ):
    gguf_checkpoint.load_gguf_llama(path)
  path = tmp_path / "bias.gguf"
  bias = {"blk.0.attn_q.bias": np.zeros(64, np.float32)}
  tiny_gguf.write_tiny_gguf(path, extra=bias)
  with pytest.raises(
    ValueError, match="not part of a Llama model.*attn_q.bias"
  ):
    gguf_checkpoint.load_gguf_llama(path)
  path = tmp_path / "iq.gguf"
  tiny_gguf.write_tiny_gguf(path, types={"blk.0.attn_v.weight": "IQ4_NL"})
  with pytest.raises(ValueError, match=r"blk.0.attn_v.weight \(IQ4_NL\)"):
    gguf_checkpoint.load_gguf_llama(path)
