"""Data: samplers (:mod:`sampling`), loaders (:mod:`loaders`), splits (:mod:`splits`)."""
