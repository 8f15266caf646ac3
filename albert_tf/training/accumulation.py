"""The rule of `--gradient_accumulation_steps`, importable without TensorFlow (the entry
points check their flags with it before anything heavy is imported; the Trainer checks it
again once the replica count is known). The accumulation itself is in
albert_tf.training.step."""

FLAG_HELP = ("Gradient accumulation over K slices: each step's batch is split into K slices computed one after "
             "another: the same step, with the activations of one slice alive at a time. --train_batch_size "
             "stays the global batch "
             "of one optimizer step, and K must divide its share per replica; the step count, learning-rate "
             "schedule, checkpoints and examples/s count optimizer steps and whole batches.")


def check_accumulation(steps, train_batch_size, replicas=1):
    """Raises ValueError naming --gradient_accumulation_steps and --train_batch_size unless
    `steps` (K) is at least 1 and divides the per-replica batch.

    Args:
        steps: K, the slices per step.
        train_batch_size: the global batch G of one optimizer step.
        replicas: the strategy's replicas in sync (1 where not known yet: then K must
            divide G).
    """
    steps, batch, replicas = int(steps), int(train_batch_size), int(replicas)
    if steps < 1:
        raise ValueError(f"--gradient_accumulation_steps must be at least 1, got {steps} (each step's "
                         f"--train_batch_size={batch} batch is split into that many slices).")
    per_replica = batch // replicas
    if per_replica % steps:
        where = (f"the per-replica batch of --train_batch_size={batch} over {replicas} replicas is {per_replica}"
                 if replicas > 1 else f"--train_batch_size={batch}")
        raise ValueError(f"--gradient_accumulation_steps={steps} must divide the per-replica batch: {where}, "
                         f"not a multiple of {steps}.")
