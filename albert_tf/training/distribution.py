"""`--strategy` -> a tf.distribute strategy (tpu | multi_worker_mirrored | mirrored |
one_device | default). The training loop is the same for all of them."""

import tensorflow as tf

from albert_tf.training.optimizer import dense

STRATEGIES = ("tpu", "multi_worker_mirrored", "mirrored", "one_device", "default")


def get_strategy(name, tpu=None):
    """Builds the strategy.

    Args:
        name: one of `STRATEGIES`.
        tpu: TPU name or grpc address for `tpu` (required there).

    Raises:
        ValueError: unknown name, or a TPU strategy without --tpu.
    """
    if name not in STRATEGIES:
        raise ValueError(f"--strategy must be one of {', '.join(STRATEGIES)}, got {name!r}.")
    if name == "tpu":
        if not tpu:
            raise ValueError("--strategy=tpu needs --tpu (the TPU name or grpc:// address).")
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    if tpu:
        raise ValueError(f"--tpu={tpu} is only used with --strategy=tpu (got --strategy={name}).")
    if name == "multi_worker_mirrored":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    return tf.distribute.get_strategy()


def is_chief(strategy):
    """True for the worker that writes checkpoints and logs (always true off multi-worker)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type is None or task_type == "chief" or (task_type == "worker" and task_id == 0)


def check_global_batch(strategy, global_batch_size, flag="--train_batch_size"):
    """Raises ValueError unless the global batch splits evenly over the strategy's replicas."""
    replicas = strategy.num_replicas_in_sync
    if int(global_batch_size) % replicas:
        raise ValueError(f"{flag}={global_batch_size} is not divisible by the {replicas} replicas of the strategy.")


def sum_and_clip(gradients, clip_norm):
    """In replica context: this replica's gradients summed over all replicas, then clipped
    to global norm `clip_norm` (the release's clipping, which albert_tf's optimizers
    expect: they do not all-reduce again). Embedding gradients (tf.IndexedSlices, one row
    per token occurrence) are made dense first, so the norm is the gradient's own: with
    repeated tokens the rows' norm is not."""
    gradients = [dense(g) if g is not None else None for g in gradients]
    ctx = tf.distribute.get_replica_context()
    if ctx.num_replicas_in_sync > 1:
        gradients = ctx.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
    clipped, _ = tf.clip_by_global_norm(gradients, clip_norm)
    return clipped
