"""Empirical privacy auditing: epsilon lower bounds that a correct
implementation can never push above its accountant's epsilon.

* :mod:`~zoprivacy.audit.clopper_pearson`: exact binomial confidence bounds
  and the epsilon a threshold test certifies (Jagielski et al. 2020, Nasr
  et al. 2021);
* :mod:`~zoprivacy.audit.distinguishing_game`: one estimator step with and
  without a worst-case canary, many times over fresh noise;
* :mod:`~zoprivacy.audit.one_run`: the one-run audit of Steinke, Nasr and
  Jagielski (2023).

``python -m zoprivacy.audit`` audits registered estimators calibrated to a
target epsilon (``docs/auditing.md``).
"""
