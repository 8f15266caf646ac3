"""`--strategy` -> a tf.distribute strategy (tpu | multi_worker_mirrored | mirrored |
one_device | default). The training loop is the same for all of them. `worker_lost` turns
the error of a multi-worker run that lost a worker into a `WorkerLostError` naming the lost
worker and the newest checkpoint (docs/pretraining.md, "Scaling out").
"""

import re

import tensorflow as tf

from albert_tf.training.errors import WorkerLostError
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


def is_multi_worker(strategy):
    """True under MultiWorkerMirroredStrategy with a cluster of more than one worker."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return False
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec() if resolver is not None else tf.train.ClusterSpec({})
    return sum(spec.num_tasks(job) for job in spec.jobs) > 1


def check_same_start(strategy, step, output_dir):
    """Multi-worker: raises ValueError unless every worker starts at the same step (each
    resumes from the newest checkpoint in output_dir, which must then be one directory that
    every worker reads: a shared filesystem). One collective op at the start; nothing
    elsewhere."""
    if not is_multi_worker(strategy):
        return

    def gather():
        return tf.distribute.get_replica_context().all_gather(tf.constant([int(step)], tf.int64), axis=0)

    gathered = tf.function(lambda: strategy.run(gather), autograph=False)()
    steps = sorted({int(s) for s in strategy.experimental_local_results(gathered)[0].numpy()})
    if len(steps) > 1:
        raise ValueError(f"the workers start at different steps ({', '.join(map(str, steps))}): every worker resumes "
                         f"from the newest checkpoint in --output_dir={output_dir}, so it must be the same directory "
                         "for all of them, on a filesystem they all read (e.g. gs:// or a shared mount).")


def check_best_kept(strategy, keeps_best):
    """Multi-worker: raises ValueError for a best checkpoint kept (TrainingOptions.keep_best),
    before any work: the chief alone saves output_dir/best, which the other workers would not
    read back, and they would end on other weights (docs/fine_tuning.md, "The driver")."""
    if keeps_best and is_multi_worker(strategy):
        raise ValueError("the best checkpoint (keep_best) is not kept under multi-worker training: the workers "
                         "would end on different weights. Train on one machine (mirrored, one_device or default), "
                         "or without keep_best.")


# TensorFlow names the peer of a failed collective as a task ("from remote target
# /job:worker/replica:0/task:1", "cluster check alive failed, /job:worker/replica:0/task:1
# is down", the coordination service's "Task /job:worker/replica:0/task:1 heartbeat
# timeout") and/or by its address ("ipv4:127.0.0.1:32859: Failed to connect").
_TASK = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")
_ADDRESS = re.compile(r"ipv[46]:(\[[^\]]+\]:\d+|[\w.-]+:\d+)")
# What says that the cluster lost a worker even where no peer is named: collectives aborted,
# the peer health check, the coordination service's heartbeat check or its stop.
_REASON = re.compile(r"(Collective ops is aborted by: .*|cluster check alive failed.*|.*heartbeat timeout.*"
                     r"|.*[Cc]oordination service has (?:stopped|been shut ?down).*)")
# What TensorFlow raises in a worker whose peer is gone: Unavailable (connection refused or
# closed, the health check), DeadlineExceeded (a timeout), Aborted, Cancelled (ops aborted
# beside the failed one) and FailedPrecondition (the peer restarted meanwhile). Each counts
# only when the message names another worker or says that the cluster lost one (_REASON):
# the same errors come from storage (a gs:// read that failed) and are reported as they are.
_PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.AbortedError,
                tf.errors.CancelledError, tf.errors.FailedPreconditionError)


def describe_lost_peer(message, cluster, own_task):
    """Which worker TensorFlow's error `message` names as lost: "worker 1 (127.0.0.1:2223)"
    from its /job:worker/replica:0/task:1 or its address, resolved with `cluster` (the
    cluster spec as a dict, job -> addresses); an address outside the cluster counts only
    on a port of the cluster's ("the worker at 10.0.0.9:2222": a worker reached by another
    name), not another server's (storage, 443). This worker (`own_task`, (job, index)) is
    never the one. None when the message names no other worker."""
    for job, index in _TASK.findall(message):
        if (job, int(index)) != tuple(own_task):
            addresses = cluster.get(job, [])
            address = f" ({addresses[int(index)]})" if int(index) < len(addresses) else ""
            return f"{job} {index}{address}"
    ports = {a.rsplit(":", 1)[-1] for addresses in cluster.values() for a in addresses}
    for address in _ADDRESS.findall(message):
        tasks = [(job, addresses.index(address)) for job, addresses in cluster.items() if address in addresses]
        if not tasks:
            if address.rsplit(":", 1)[-1] in ports:
                return f"the worker at {address}"
            continue
        if tasks[0] != tuple(own_task):
            return f"{tasks[0][0]} {tasks[0][1]} ({address})"
    return None


def lost_peer(error, cluster, own_task):
    """(who, what TensorFlow said) when `error` (a tf.errors.OpError of this worker) is the
    loss of a peer worker (_PEER_ERRORS naming another worker of `cluster`, or any error
    saying so: _REASON; `who` is "a peer worker" where none is named), else None."""
    message = error.message or ""
    peer = describe_lost_peer(message, cluster, own_task)
    reason = _REASON.search(message)
    if not (reason or (peer is not None and isinstance(error, _PEER_ERRORS))):
        return None
    said = reason.group(0).strip() if reason else message.strip().splitlines()[-1] if message.strip() else ""
    if len(said) > 300:
        said = said[:300] + "..."
    return peer or "a peer worker", said


def worker_lost(strategy, error, newest_checkpoint):
    """A WorkerLostError for `error` (a tf.errors.OpError of this worker) when it is the
    loss of a peer under multi-worker training (`lost_peer`), else None.

    Args:
        strategy: the run's strategy.
        error: what the training raised.
        newest_checkpoint: the prefix every worker will resume from, or None.
    """
    if not (is_multi_worker(strategy) and isinstance(error, tf.errors.OpError)):
        return None
    resolver = strategy.cluster_resolver
    found = lost_peer(error, resolver.cluster_spec().as_dict(), (resolver.task_type, resolver.task_id))
    if found is None:
        return None
    peer, said = found
    resume = (f"The newest checkpoint is {newest_checkpoint}: start every worker again with the same command and "
              "TF_CONFIG to resume from it" if newest_checkpoint else
              "No checkpoint was written yet: starting every worker again with the same command and TF_CONFIG "
              "starts the run anew")
    return WorkerLostError(f"{peer} is gone; this worker ({resolver.task_type} "
                           f"{resolver.task_id}) cannot go on without it. {resume} (a replacement machine takes the "
                           f"lost one's address in TF_CONFIG). TensorFlow: {type(error).__name__}: {said}")


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
