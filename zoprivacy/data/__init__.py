"""Data: samplers (:mod:`sampling`), the batch-selection value that gives a
sampler and the scheme it accounts (:mod:`batch_selection`), loaders (:mod:`loaders`), splits (:mod:`splits`)."""
