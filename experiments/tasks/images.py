"""Image tasks: digits, Fashion-MNIST (with PAZO's 4% public split), CIFAR-10, Tiny-ImageNet.

=========================  ==================================  ===============
``dataset``                model                               paper setting
=========================  ==================================  ===============
``digits``                 small CNN / MLP (``config.model``)  offline default
``fashion_mnist``          small CNN / MLP (``config.model``)  DPZero analog
``fashion_mnist_public``   small CNN, optional 4% public split offline PAZO
``digits_public``          small CNN, optional 4% public split offline PAZO
``cifar10``                NF-ResNet18 (from scratch)          PAZO Table 1
``tiny_imagenet``          ViT-small (10.8M, random init)      PAZO Table 2
=========================  ==================================  ===============

Every image task takes ``config.public`` (``'stratified4'`` or
``'imbalanced4'``: PAZO's 4% public split, removed from the private set), so
a public-data estimator runs on any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from experiments.tasks.common import (
  EVAL_FIELDS,
  IMAGE_PUBLIC_FIELDS,
  IMAGE_SPLITS,
  flax_task,
  image_public_split,
  model_kwargs,
  train_eval_split,
)
from experiments.tasks.registry import register
from experiments.tasks.task import Task
from zoprivacy.data import loaders
from zoprivacy.models import nf_resnet, small, vit

MODELS: dict[str, Callable[..., Any]] = {
  "cnn": small.SmallCNN,
  "mlp": small.MLP,
}


# The config fields each task reads (registry.register): the public split's,
# and train_eval_split's for those that hold out a validation set.
PUBLIC = IMAGE_PUBLIC_FIELDS
HELD_OUT = IMAGE_PUBLIC_FIELDS + EVAL_FIELDS


def _image_task(config, splits) -> Task:
  if config.model not in MODELS:
    raise ValueError(
      f"Unknown model {config.model!r} for an image task; "
      f"choose one of {sorted(MODELS)}."
    )
  cls = MODELS[config.model]
  model = cls(num_classes=splits.train.num_classes, **model_kwargs(config, cls))
  # config.public (PAZO's 4% split) feeds the public-data estimators.
  private, public = image_public_split(config, splits.train)
  return flax_task(model, private, splits.test, public)


@register("digits", fields=PUBLIC, public_splits=IMAGE_SPLITS)
def digits_task(config) -> Task:
  return _image_task(config, loaders.load_digits(seed=config.seed))


@register("fashion_mnist", fields=PUBLIC, public_splits=IMAGE_SPLITS)
def fashion_mnist_task(config) -> Task:
  return _image_task(
    config,
    loaders.load_fashion_mnist(data_dir=config.get("data_dir") or None),
  )


@register("cifar10", fields=HELD_OUT, public_splits=IMAGE_SPLITS)
def cifar10_task(config) -> Task:
  """PAZO Table 1: NF-ResNet18 from scratch on CIFAR-10, 4% imbalanced public."""
  data = loaders.load_cifar10(config.get("data_dir") or None)
  private, public = image_public_split(config, data.train)
  train, test = train_eval_split(config, private, data.test)
  model = nf_resnet.NFResNet(
    num_classes=data.train.num_classes,
    **model_kwargs(config, nf_resnet.NFResNet),
  )
  return flax_task(model, train, test, public)


@register(
  "tiny_imagenet",
  fields=(*HELD_OUT, "max_per_class"),
  public_splits=IMAGE_SPLITS,
)
def tiny_imagenet_task(config) -> Task:
  """PAZO Table 2: ViT-small (10.8M parameters) on Tiny-ImageNet, 4% stratified public.

  ``model_kwargs`` overrides :func:`zoprivacy.models.vit.vit_small_pazo`'s
  sizes; ``max_per_class`` loads only that many training images per class.
  """
  data = loaders.load_tiny_imagenet(
    config.get("data_dir") or None,
    max_per_class=config.get("max_per_class") or None,
  )
  private, public = image_public_split(config, data.train)
  train, test = train_eval_split(config, private, data.test)
  small = vit.vit_small_pazo(data.train.num_classes)
  sizes = {
    f: getattr(small, f)
    for f in ("patch_size", "hidden_size", "depth", "num_heads", "mlp_dim")
  }
  sizes.update(model_kwargs(config, vit.ViT))
  model = vit.ViT(num_classes=data.train.num_classes, **sizes)
  return flax_task(model, train, test, public)


@register("fashion_mnist_public", fields=HELD_OUT, public_splits=IMAGE_SPLITS)
def fashion_mnist_public_task(config) -> Task:
  """Fashion-MNIST with the small CNN and PAZO's public split (offline analog of
  PAZO Table 1: ``public="imbalanced4"`` takes about 2,400 of the 60,000
  training images, 4% in expectation)."""
  data = loaders.load_fashion_mnist(config.get("data_dir") or None)
  private, public = image_public_split(config, data.train)
  train, test = train_eval_split(config, private, data.test)
  model = small.SmallCNN(
    num_classes=data.train.num_classes,
    **model_kwargs(config, small.SmallCNN),
  )
  return flax_task(model, train, test, public)


@register("digits_public", fields=PUBLIC, public_splits=IMAGE_SPLITS)
def digits_public_task(config) -> Task:
  """scikit-learn's digits with a public split (``public='stratified4'`` or
  ``'imbalanced4'``): a seconds-long offline task for the public-data
  methods."""
  data = loaders.load_digits(seed=config.seed)
  private, public = image_public_split(config, data.train)
  model = small.SmallCNN(
    num_classes=data.train.num_classes,
    **model_kwargs(config, small.SmallCNN),
  )
  return flax_task(model, private, data.test, public)
