"""all-MiniLM-L6-v2's ``config.json`` (the encoder's shapes), for
``--minilm-weights random`` on a machine without the checkpoint: the JAX
model (``peers.py``) and its torch twin (``torch_bert.py``) read it."""

MINILM_L6_CONFIG = dict(
  vocab_size=30522,
  hidden_size=384,
  num_hidden_layers=6,
  num_attention_heads=12,
  intermediate_size=1536,
  max_position_embeddings=512,
  type_vocab_size=2,
  layer_norm_eps=1e-12,
)
