"""Private hyperparameter tuning (repeat and select) for ``experiments.tune``."""
