"""The runner: one private training run from a config, end to end.

``python -m experiments.run --config configs/<name>.py`` parses the command
line (:mod:`~experiments.run.cli`), checks the config before JAX loads
(:mod:`~experiments.run.config_fields`, :mod:`~experiments.run.preflight`),
resolves the run once (:mod:`~experiments.run.run_setup`,
:mod:`~experiments.run.resolved_run`), places it on the devices
(:mod:`~experiments.run.placement`, :mod:`~experiments.run.multihost`), and
trains (:mod:`~experiments.run.train`, :mod:`~experiments.run.loop`,
:mod:`~experiments.run.step`) with the write-ahead privacy ledger
(:mod:`~experiments.run.run_ledger`, :mod:`~experiments.run.attempts`) and
checkpoints (:mod:`~experiments.run.checkpointing`), then reports
(:mod:`~experiments.run.report`).

The runner sits above the tasks and below the tuning and the
reproductions: it builds a task by name through the tasks package
(:mod:`experiments.tasks`), whose modules register themselves in
:mod:`experiments.tasks.registry`; the checks before JAX loads read the
tasks' declarations from that registry alone.
"""
