"""Paper-reproduction commands run by ``python -m experiments.reproduce``."""
