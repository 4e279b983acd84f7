"""OPT causal LM: tiny checkpoints written here in the exact Hugging Face
format (config.json field names, safetensors tensor names, the sharded index),
checked against an independent NumPy forward pass written from the HF math;
the per-example loss contract; KV-cache greedy decoding; bfloat16 weights with
float32 perturbations; the byte-level BPE tokenizer."""

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import safetensors.numpy as safetensors_numpy

from zoprivacy.first_order import per_example_check
from zoprivacy.models.hf_checkpoint import (
  SafetensorsCheckpoint,
  load_bpe_tokenizer,
  load_opt,
  opt_params_from_hf,
)
from zoprivacy.models.opt import (
  OPTConfig,
  OPTForCausalLM,
  per_example_lm_loss,
  perturb_float32,
)
from zoprivacy.models.opt_generate import generate
from zoprivacy.zo import queries

# field names and non-size values as in facebook/opt-125m's config.json
HF_CONFIG = dict(
  _name_or_path="tiny-opt",
  activation_dropout=0.0,
  activation_function="relu",
  architectures=["OPTForCausalLM"],
  attention_dropout=0.0,
  bos_token_id=2,
  do_layer_norm_before=True,
  dropout=0.1,
  enable_bias=True,
  eos_token_id=2,
  ffn_dim=32,
  hidden_size=16,
  init_std=0.02,
  layer_norm_elementwise_affine=True,
  layerdrop=0.0,
  max_position_embeddings=24,
  model_type="opt",
  num_attention_heads=4,
  num_hidden_layers=3,
  pad_token_id=1,
  prefix="</s>",
  torch_dtype="float32",
  use_cache=True,
  vocab_size=48,
  word_embed_proj_dim=16,
)
# opt-350m's shape of model: post-LN, no final LayerNorm, project_in/out
POST_LN_PROJECTED = dict(
  HF_CONFIG, do_layer_norm_before=False, word_embed_proj_dim=8
)


def _hf_tensors(cfg, seed=0, prefix="model.decoder."):
  rng = np.random.default_rng(seed)
  r = lambda *s: rng.normal(0, 0.2, s).astype(np.float32)
  h, f, e = cfg["hidden_size"], cfg["ffn_dim"], cfg["word_embed_proj_dim"]
  t = {
    prefix + "embed_tokens.weight": r(cfg["vocab_size"], e),
    prefix + "embed_positions.weight": r(cfg["max_position_embeddings"] + 2, h),
  }
  if e != h:
    t[prefix + "project_in.weight"] = r(h, e)  # Linear(e -> h): [out, in]
    t[prefix + "project_out.weight"] = r(e, h)
  if cfg["do_layer_norm_before"]:
    t[prefix + "final_layer_norm.weight"] = 1 + r(h)
    t[prefix + "final_layer_norm.bias"] = r(h)
  for i in range(cfg["num_hidden_layers"]):
    p = f"{prefix}layers.{i}."
    for name, (o, n) in {
      "self_attn.q_proj": (h, h),
      "self_attn.k_proj": (h, h),
      "self_attn.v_proj": (h, h),
      "self_attn.out_proj": (h, h),
      "fc1": (f, h),
      "fc2": (h, f),
    }.items():
      t[p + name + ".weight"], t[p + name + ".bias"] = r(o, n), r(o)
    for name in ("self_attn_layer_norm", "final_layer_norm"):
      t[p + name + ".weight"], t[p + name + ".bias"] = 1 + r(h), r(h)
  t["lm_head.weight"] = t[prefix + "embed_tokens.weight"].copy()
  return t


def _write_checkpoint(path, cfg, tensors, shards=1):
  """config.json + model.safetensors, or the index + ``shards`` shard files."""
  path.mkdir(parents=True, exist_ok=True)
  (path / "config.json").write_text(json.dumps(cfg, indent=2))
  if shards == 1:
    safetensors_numpy.save_file(tensors, str(path / "model.safetensors"))
    return
  names = sorted(tensors)
  weight_map = {}
  for s, part in enumerate(np.array_split(np.arange(len(names)), shards)):
    file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
    chunk = {names[i]: tensors[names[i]] for i in part}
    safetensors_numpy.save_file(chunk, str(path / file))
    weight_map.update(dict.fromkeys(chunk, file))
  total = sum(v.nbytes for v in tensors.values())
  (path / "model.safetensors.index.json").write_text(
    json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
  )


def _np_layer_norm(x, w, b):
  mu = x.mean(-1, keepdims=True)
  var = ((x - mu) ** 2).mean(-1, keepdims=True)
  return (x - mu) / np.sqrt(var + 1e-5) * w + b


def _np_opt_logits(t, cfg, ids, mask):
  """HF ``OPTForCausalLM`` forward in float64 NumPy, from the HF tensors."""
  g = lambda k: t["model.decoder." + k].astype(np.float64)
  lin = lambda x, k: x @ g(k + ".weight").T + g(k + ".bias")
  ln = lambda x, k: _np_layer_norm(x, g(k + ".weight"), g(k + ".bias"))
  pre_ln, projected = cfg["do_layer_norm_before"], "project_in" in str(t.keys())
  nh = cfg["num_attention_heads"]
  hd = cfg["hidden_size"] // nh
  b, s = ids.shape
  positions = np.cumsum(mask, axis=1) * mask - 1
  x = g("embed_tokens.weight")[ids]
  if projected:
    x = x @ g("project_in.weight").T
  x = x + g("embed_positions.weight")[positions + 2]
  allowed = np.tril(np.ones((s, s), bool))[None] & (mask[:, None, :] == 1)
  heads = lambda y: y.reshape(b, s, nh, hd).transpose(0, 2, 1, 3)
  for i in range(cfg["num_hidden_layers"]):
    p = f"layers.{i}."
    h = ln(x, p + "self_attn_layer_norm") if pre_ln else x
    q = heads(lin(h, p + "self_attn.q_proj") * hd**-0.5)
    k, v = (
      heads(lin(h, p + "self_attn.k_proj")),
      heads(lin(h, p + "self_attn.v_proj")),
    )
    scores = np.where(allowed[:, None], q @ k.transpose(0, 1, 3, 2), -1e30)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    ctx = (w @ v).transpose(0, 2, 1, 3).reshape(b, s, -1)
    x = x + lin(ctx, p + "self_attn.out_proj")
    x = x if pre_ln else ln(x, p + "self_attn_layer_norm")
    h = ln(x, p + "final_layer_norm") if pre_ln else x
    x = x + lin(np.maximum(lin(h, p + "fc1"), 0), p + "fc2")
    x = x if pre_ln else ln(x, p + "final_layer_norm")
  if pre_ln:
    x = ln(x, "final_layer_norm")
  if projected:
    x = x @ g("project_out.weight").T
  return x @ g("embed_tokens.weight").T


# right-padded, left-padded, padded on both sides and unpadded rows
IDS = np.array(
  [
    [2, 5, 9, 14, 7, 30, 1, 1],
    [1, 1, 2, 11, 40, 3, 8, 21],
    [1, 2, 17, 17, 6, 1, 1, 1],
    [2, 33, 4, 12, 9, 45, 10, 19],
  ],
  np.int32,
)
MASK = (IDS != 1).astype(np.int32)


@pytest.fixture(scope="module")
def tiny_opt(tmp_path_factory):
  path = tmp_path_factory.mktemp("opt") / "tiny-opt"
  tensors = _hf_tensors(HF_CONFIG)
  _write_checkpoint(path, HF_CONFIG, tensors)
  config, params = load_opt(path)
  return path, tensors, config, params


@pytest.mark.parametrize(
  "cfg", [HF_CONFIG, POST_LN_PROJECTED], ids=["pre_ln", "post_ln_projected"]
)
def test_logits_match_numpy_reference(tmp_path, cfg):
  tensors = _hf_tensors(cfg, seed=1)
  _write_checkpoint(tmp_path, cfg, tensors)
  config, params = load_opt(tmp_path)
  assert config.word_embed_proj_dim == cfg["word_embed_proj_dim"]
  assert config.has_final_layer_norm == cfg["do_layer_norm_before"]
  assert params["layers"]["fc1"]["kernel"].shape == (
    3,
    16,
    32,
  )  # [layer, in, out]
  logits = jax.jit(OPTForCausalLM(config).apply)({"params": params}, IDS, MASK)
  assert logits.dtype == jnp.float32
  ref = _np_opt_logits(tensors, cfg, IDS, MASK)
  real = MASK == 1
  np.testing.assert_allclose(
    np.asarray(logits)[real], ref[real], atol=1e-5, rtol=1e-5
  )


def test_layers_are_scanned():
  """The traced program has the same size for 2 and 12 layers (one nn.scan
  over stacked parameters), so compile time does not grow with depth."""
  sizes = []
  for depth in (2, 12):
    config = OPTConfig.from_hf(dict(HF_CONFIG, num_hidden_layers=depth))
    model = OPTForCausalLM(config)
    params = jax.eval_shape(model.init, jax.random.key(0), IDS, MASK)
    assert params["params"]["layers"]["fc2"]["kernel"].shape == (depth, 32, 16)
    sizes.append(len(jax.make_jaxpr(model.apply)(params, IDS, MASK).eqns))
  assert sizes[0] == sizes[1]
  too_long = np.ones((1, HF_CONFIG["max_position_embeddings"] + 1), np.int32)
  with pytest.raises(ValueError, match="max_position_embeddings"):
    jax.eval_shape(model.apply, params, too_long)


def test_sharded_checkpoint_equals_single_file(tmp_path, tiny_opt):
  _, tensors, config, params = tiny_opt
  _write_checkpoint(tmp_path / "sharded", HF_CONFIG, tensors, shards=2)
  files = sorted(p.name for p in (tmp_path / "sharded").iterdir())
  assert files == [
    "config.json",
    "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors",
    "model.safetensors.index.json",
  ]
  config2, sharded = load_opt(tmp_path / "sharded")
  assert config2 == config
  assert jax.tree.structure(sharded) == jax.tree.structure(params)
  for a, b in zip(jax.tree.leaves(sharded), jax.tree.leaves(params)):
    np.testing.assert_array_equal(a, b)
  # checkpoints saved from OPTModel name the tensors decoder.* (no model.)
  plain = {k.removeprefix("model."): v for k, v in tensors.items()}
  from_plain = opt_params_from_hf(plain, config)
  for a, b in zip(jax.tree.leaves(from_plain), jax.tree.leaves(params)):
    np.testing.assert_array_equal(a, b)
  # a missing shard, or missing files, fail fast naming what to download
  (tmp_path / "sharded" / "model-00002-of-00002.safetensors").unlink()
  with pytest.raises(FileNotFoundError, match="model-00002-of-00002"):
    load_opt(tmp_path / "sharded")
  (tmp_path / "empty").mkdir()
  with pytest.raises(FileNotFoundError, match=r"config\.json.*huggingface\.co"):
    load_opt(tmp_path / "empty")
  (tmp_path / "empty" / "config.json").write_text(json.dumps(HF_CONFIG))
  with pytest.raises(FileNotFoundError, match=r"model\.safetensors"):
    load_opt(tmp_path / "empty")


def test_loader_rejects_bad_checkpoints(tiny_opt):
  path, tensors, config, _ = tiny_opt
  assert SafetensorsCheckpoint(path).shape("lm_head.weight") == (48, 16)
  broken = {k: v for k, v in tensors.items() if "layers.2.fc2.bias" not in k}
  with pytest.raises(KeyError, match=r"layers\.2\.fc2\.bias"):
    opt_params_from_hf(broken, config)
  wrong = OPTConfig.from_hf(dict(HF_CONFIG, ffn_dim=24))
  # the first mismatching tensor is named: fc1 of layer 0 (32 wide, not 24)
  with pytest.raises(ValueError, match=r"layers\.0\.fc1\.weight gives"):
    opt_params_from_hf(tensors, wrong)
  untied = dict(tensors, **{"lm_head.weight": tensors["lm_head.weight"] + 1})
  with pytest.raises(ValueError, match="untied"):
    opt_params_from_hf(untied, config)
  with pytest.raises(ValueError, match="activation_function"):
    OPTConfig.from_hf(dict(HF_CONFIG, activation_function="silu"))


def _loss_batch():
  loss_mask = np.zeros_like(MASK)
  loss_mask[0, 3:6] = 1  # answer tokens of each example
  loss_mask[1, 5:8] = 1
  loss_mask[2, 4:5] = 1
  loss_mask[3, 6:8] = 1
  return dict(input_ids=IDS, attention_mask=MASK, loss_mask=loss_mask)


def test_per_example_loss(tiny_opt):
  _, tensors, config, params = tiny_opt
  loss = jax.jit(
    functools.partial(per_example_lm_loss, model=OPTForCausalLM(config))
  )
  batch = _loss_batch()
  out = np.asarray(loss(params, batch))
  # the documented reduction, from the NumPy reference logits
  ref_logits = _np_opt_logits(tensors, HF_CONFIG, IDS, MASK)
  logp = ref_logits - np.log(np.exp(ref_logits).sum(-1, keepdims=True))
  for b in range(4):
    t = np.flatnonzero(batch["loss_mask"][b])
    ref = -np.mean(logp[b, t - 1, IDS[b, t]])
    np.testing.assert_allclose(out[b], ref, rtol=1e-5)
  # changing example j leaves every other loss bit-for-bit unchanged
  changed = dict(batch, input_ids=IDS.copy())
  changed["input_ids"][2, 1:5] = [40, 41, 42, 43]
  out2 = np.asarray(loss(params, changed))
  np.testing.assert_array_equal(out2[[0, 1, 3]], out[[0, 1, 3]])
  assert abs(out2[2] - out[2]) > 1e-3
  per_example_check.assert_per_example(loss, params, batch, key=0)
  # more padding, right or left, does not change any loss
  for side in ("right", "left"):
    pad = lambda a, v: np.pad(
      a, ((0, 0), (3, 0) if side == "left" else (0, 3)), constant_values=v
    )
    padded = dict(
      input_ids=pad(IDS, 1),
      attention_mask=pad(MASK, 0),
      loss_mask=pad(batch["loss_mask"], 0),
    )
    np.testing.assert_allclose(loss(params, padded), out, atol=1e-6, rtol=1e-6)


def _greedy_by_recomputation(forward, params, ids, mask, steps, eos, pad):
  """Greedy decoding running the full forward (no cache) at every step on a
  fixed-shape buffer (prompt, then the tokens so far; the rest masked)."""
  b, p = ids.shape
  seq = np.concatenate([ids, np.full((b, steps), pad, np.int32)], 1)
  seq_mask = np.concatenate([mask, np.zeros((b, steps), np.int32)], 1)
  out = np.full((b, steps), pad, np.int32)
  done = np.zeros(b, bool)
  for k in range(steps):
    logits = np.asarray(forward({"params": params}, seq, seq_mask))
    last = np.array([np.flatnonzero(m)[-1] for m in seq_mask])
    token = np.where(done, pad, logits[np.arange(b), last].argmax(-1))
    out[:, k] = token
    done |= token == eos
    seq[:, p + k], seq_mask[:, p + k] = token, 1
  return out


# Slow: test_opt_reference.py checks the cached decoding against the reference.
@pytest.mark.slow
def test_greedy_decoding_with_kv_cache(tiny_opt):
  _, _, config, params = tiny_opt
  model = OPTForCausalLM(config)
  forward = jax.jit(model.apply)
  ids, mask = IDS[:, :6], MASK[:, :6]  # rows padded right, left, both, none
  steps = 6
  no_eos = generate(params, ids, mask, steps, model=model, eos_token_id=-1)
  ref = _greedy_by_recomputation(forward, params, ids, mask, steps, -1, 1)
  np.testing.assert_array_equal(no_eos, ref)
  # stop at eos: a token example 0 first emits at step 1 or later
  row = list(np.asarray(no_eos[0]))
  first = next(k for k in range(1, steps) if row[k] not in row[:k])
  eos = row[first]
  out = np.asarray(
    generate(params, ids, mask, steps, model=model, eos_token_id=eos)
  )
  np.testing.assert_array_equal(
    out, _greedy_by_recomputation(forward, params, ids, mask, steps, eos, 1)
  )
  assert out[0, first] == eos and np.all(out[0, first + 1 :] == 1)
  for r in range(len(ids)):  # each row: the no-eos tokens up to its first eos
    stop = list(no_eos[r]).index(eos) + 1 if eos in no_eos[r] else steps
    np.testing.assert_array_equal(out[r, :stop], no_eos[r, :stop])
    assert np.all(out[r, stop:] == 1)


# Slow: test_opt_reference.py and test_llama.py check bfloat16 weights.
@pytest.mark.slow
def test_bf16_weights_with_float32_perturbation(tiny_opt):
  """Two-point estimates ``(f(x + l u) - f(x - l u)) / (2 l)``, l = 1e-3.

  Approach (module docstring of ``zoprivacy.models.opt``): bfloat16 stored
  weights, perturbation ``float32(x) + l u`` added in float32, float32
  forward. The estimate then differs from the all-float32 one only through
  rounding ``x`` to bfloat16, which moves it by about ``2**-9 |x|`` (here
  comparable to ``l |u|``). Stated tolerance: relative error 5% in the
  Frobenius norm over 8 directions x 4 examples (measured: 1.3%). Adding
  ``l u`` in bfloat16 instead (a plain bfloat16 addition) rounds
  much of the perturbation away: at least 3 times the error (measured: 39%);
  ``queries.perturb`` itself forms a 16-bit leaf's point in float32.
  """
  path, _, config, params32 = tiny_opt
  _, params16 = load_opt(path, param_dtype=jnp.bfloat16)
  assert all(x.dtype == jnp.bfloat16 for x in jax.tree.leaves(params16))
  model = OPTForCausalLM(config)
  loss = jax.jit(functools.partial(per_example_lm_loss, model=model))
  lam, batch = 1e-3, _loss_batch()

  def direction(seed):  # public Gaussian directions, drawn with numpy
    rng = np.random.default_rng(seed)
    return jax.tree.map(
      lambda x: rng.standard_normal(x.shape).astype(np.float32), params32
    )

  def estimates(params, perturb):
    @jax.jit
    def two_point(params, u):
      plus, minus = perturb(params, u, lam), perturb(params, u, -lam)
      return (loss(plus, batch) - loss(minus, batch)) / (2 * lam)

    return np.stack([two_point(params, direction(s)) for s in range(8)])

  est32 = estimates(params32, queries.perturb)
  rel_error = lambda est: np.linalg.norm(est - est32) / np.linalg.norm(est32)
  err16 = rel_error(estimates(params16, perturb_float32))
  assert err16 < 0.05, err16
  naive = rel_error(  # l u added in bfloat16
    estimates(
      params16,
      lambda p, u, step: jax.tree.map(
        lambda x, v: x + (step * v).astype(x.dtype), p, u
      ),
    )
  )
  assert naive > 3 * err16, (naive, err16)
  # bfloat16 compute: float32 logits, close to the float32 model's
  logits = lambda dtype, p: jax.jit(OPTForCausalLM(config, dtype=dtype).apply)(
    {"params": p}, IDS, MASK
  )
  logits16 = logits(jnp.bfloat16, params16)
  assert logits16.dtype == jnp.float32
  np.testing.assert_allclose(
    logits16[MASK == 1], logits(jnp.float32, params32)[MASK == 1], atol=0.1
  )


def test_bpe_tokenizer_round_trip(tmp_path):
  pytest.importorskip("tokenizers")
  from tokenizers.pre_tokenizers import ByteLevel

  vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
  for ch in sorted(ByteLevel.alphabet()):
    vocab[ch] = len(vocab)
  merges = ["Ġ t", "h e", "Ġt he", "Ġ c", "a t", "Ġc at"]
  for a, b in (m.split() for m in merges):
    vocab[a + b] = len(vocab)
  (tmp_path / "vocab.json").write_text(json.dumps(vocab))
  (tmp_path / "merges.txt").write_text(
    "#version: 0.2\n" + "\n".join(merges) + "\n"
  )
  (tmp_path / "special_tokens_map.json").write_text(
    json.dumps(
      dict(
        bos_token="</s>", eos_token="</s>", unk_token="</s>", pad_token="<pad>"
      )
    )
  )
  tok = load_bpe_tokenizer(tmp_path)
  text = "A cat saw the cat."
  enc = tok.encode(text)
  assert enc.ids[0] == 2  # OPT prepends </s>
  assert vocab["Ġcat"] in enc.ids and vocab["Ġthe"] in enc.ids
  assert tok.decode(enc.ids) == text  # BOS skipped as a special token
  batch = tok.encode_batch(["the cat", "A cat saw the cat."])
  assert len(batch[0].ids) == len(batch[1].ids)
  assert batch[0].ids[-1] == 1 and batch[0].attention_mask[-1] == 0
  assert tok.decode(batch[0].ids) == "the cat"
  tok.save(str(tmp_path / "tokenizer.json"))  # the tokenizer.json route
  assert load_bpe_tokenizer(tmp_path).encode(text).ids == enc.ids


def test_tokenizer_larger_than_the_embedding_is_refused(tmp_path):
  """The fixture's tokenizer (384 tokens) next to a config.json that
  claims fewer embedding rows is refused; as many or more rows load."""
  import shutil
  from pathlib import Path

  fixture = Path(__file__).parents[1] / "fixtures" / "tiny_opt"
  for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(fixture / name, tmp_path / name)
  config = json.loads((fixture / "config.json").read_text())
  for rows in (config["vocab_size"], config["vocab_size"] + 8):
    (tmp_path / "config.json").write_text(
      json.dumps(dict(config, vocab_size=rows))
    )
    assert load_bpe_tokenizer(tmp_path).get_vocab_size() <= rows
  (tmp_path / "config.json").write_text(
    json.dumps(dict(config, vocab_size=300))
  )
  with pytest.raises(
    ValueError, match="384 tokens but the checkpoint's embedding has 300"
  ):
    load_bpe_tokenizer(tmp_path)
