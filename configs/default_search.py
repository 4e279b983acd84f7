"""A search space for ``configs/default.py``: ``python -m experiments.tune
--config configs/default.py --search=configs/default_search.py``.

Step size from a log-uniform range, privacy.clip from three values. Only fields
that leave a trial's privacy event unchanged may be searched
(``experiments/tuning/search.py``).
"""


def get_search() -> dict:
  return {
    "learning_rate": "loguniform(0.005, 0.08)",
    "privacy.clip": [0.5, 1.0, 2.0],
  }
