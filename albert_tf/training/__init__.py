"""Training: the one driver every command runs through (driver), optimizers, schedules,
distribution, checkpoints and what a run reports (reporting)."""
