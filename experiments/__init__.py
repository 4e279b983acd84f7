"""Experiment runner for zoprivacy: ``python -m experiments.run --config ...``."""
