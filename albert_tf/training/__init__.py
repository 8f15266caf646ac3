"""Training: optimizers, schedules, distribution, the pretraining loop, checkpoints."""
