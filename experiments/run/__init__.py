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

The runner sits below the tasks, the tuning and the reproductions: none of
its modules imports them. It finds a task by name through
:mod:`~experiments.run.task_registry`, where the task modules register
themselves.
"""
