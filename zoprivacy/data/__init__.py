"""Data: batches for a jitted step (:mod:`sampling`, with the samplers of
:mod:`zoprivacy.privacy.batch_selection`), loaders (:mod:`loaders`), splits
(:mod:`splits`)."""
