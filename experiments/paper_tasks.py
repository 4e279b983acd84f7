"""Tasks of the papers' settings (registered with :func:`experiments.tasks.register`)."""
