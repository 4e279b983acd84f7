"""Flax models. Small ones live in :mod:`small`; larger ones in their own modules."""

from zoprivacy.models.small import MLP, SmallCNN
