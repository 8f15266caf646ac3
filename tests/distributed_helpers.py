"""Two replicas against one device, in this process: the tests call these functions.

Every process that runs tests splits its CPU into two logical devices before TensorFlow
starts its runtime (tests/conftest.py `pytest_configure` calls `split_cpu`), so
MirroredStrategy over /cpu:0 and /cpu:1 runs beside the other tests, which compute on /cpu:0
alone. `mirrored_vs_one_device(records)`, `finetune_mirrored_vs_one_device()` and
`fit_mirrored_vs_one_device()` train the same 5 steps with MirroredStrategy (2 replicas x 4
examples) and with one device (8 examples) and return both loss lists: the driver with the
pretraining task on RECORDS, the driver with a small classification task, or Keras
`model.fit` with albert_tf's LAMB (whose gradients must then be summed over the replicas by
Keras). `accumulation_differences(records)` trains 3 steps under MirroredStrategy with
--gradient_accumulation_steps 1 and 2, for LAMB and AdamW, on the pretraining task and the
classification task, and returns the largest per-variable ||difference|| / ||weights||
between them. `remat_differences()` compares --remat with the plain run (AdamW
classification, dropout on, padding skipped) and checks that the two replicas draw
different dropout masks. TensorFlow's op determinism is on while each runs (as
--deterministic) and put back after.
"""

import contextlib

# albert_tiny with two layers sharing one group (one group, as in every released ALBERT) for
# the tests that compare two ways of computing the same steps (devices, slices, resumption,
# XLA): what they check does not depend on the depth. test_run_pretraining,
# test_accumulation and test_training took 345 CPU-s with albert_tiny's four layers in two
# groups, 232 with the first two on these two layers.
MECHANICS = {"num_hidden_layers": 2, "num_hidden_groups": 1}


def split_cpu():
    """Splits the CPU into two logical devices (before TensorFlow starts its runtime)."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


@contextlib.contextmanager
def _two_cpus():
    """Yields (("mirrored", MirroredStrategy over /cpu:0 and /cpu:1), ("one_device", /cpu:0))
    with op determinism on, and puts determinism back as it was."""
    import tensorflow as tf
    from tensorflow.python.framework import config

    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    assert len(cpus) >= 2, f"the CPU was not split before TensorFlow started (logical CPUs: {cpus})"
    deterministic = config.is_op_determinism_enabled()
    tf.config.experimental.enable_op_determinism()
    # Each MirroredStrategy numbers its collective ops' groups from this base, and TensorFlow's
    # runtime keeps the groups it has seen: a second strategy in the process numbering from the
    # same base would meet the first one's groups (a shape mismatch). TensorFlow's own tests
    # move the base the same way ("Only set this in tests").
    tf.distribute.MirroredStrategy._collective_key_base += 100_000
    try:
        yield (("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])),
               ("one_device", tf.distribute.OneDeviceStrategy("/cpu:0")))
    finally:
        if not deterministic:
            config.disable_op_determinism()


def _iterator(trainer, strategy):
    """The training iterator, autotuning off: over two replicas, tf.data's autotuning thread would
    hold this iterator's deletion, in a later test's garbage collection, up to 60 s (the driver's
    evaluation input: albert_tf/data/maps.py `without_autotune`)."""
    from albert_tf.data.maps import without_autotune

    def dataset_fn(context):
        batch_size = context.get_per_replica_batch_size(trainer.global_batch_size)
        return trainer.task.train_dataset(context, batch_size, 0).with_options(without_autotune())

    return iter(strategy.distribute_datasets_from_function(dataset_fn))


def mirrored_vs_one_device(records):
    import keras

    from albert_tf import AlbertConfig
    from albert_tf.modeling.losses import pretraining_metrics
    from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask
    from albert_tf.training.driver import Trainer, TrainingOptions

    config = AlbertConfig.from_preset("albert_tiny").replace(
        vocab_size=3000, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **MECHANICS)
    results = {}
    with _two_cpus() as strategies:
        for name, strategy in strategies:
            keras.utils.set_random_seed(7)
            task = PretrainingTask(PretrainingOptions(config, records, max_seq_length=128, global_batch_size=8,
                                                      deterministic=True, random_seed=5, shuffle_buffer_size=100))
            trainer = Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=8, optimizer="lamb",
                                                    learning_rate=0.01, num_train_steps=100), strategy)
            iterator = _iterator(trainer, strategy)
            losses = [pretraining_metrics(trainer.train(iterator, 1))["loss"] for _ in range(5)]
            results[name] = {"replicas": strategy.num_replicas_in_sync, "losses": losses}
    return results


class ArrayClassification:
    """A small classification task on fixed arrays, for the driver under two strategies."""

    @staticmethod
    def make(config, padded=False):
        """The task; `padded`: rows end in padding (input_mask 0) and the encoders skip it."""
        import numpy as np
        import tensorflow as tf

        from albert_tf import AlbertEncoder
        from albert_tf.modeling.classifier import AlbertClassifier
        from albert_tf.modeling.losses import classifier_nll
        from albert_tf.training.task import Task

        rng = np.random.default_rng(3)
        n, length = 40, 16
        data = {"input_word_ids": rng.integers(5, config.vocab_size, (n, length)).astype("int32"),
                "input_mask": np.ones((n, length), "int32"), "input_type_ids": np.zeros((n, length), "int32"),
                "label": rng.integers(0, 3, n).astype("int32")}
        if padded:
            data["input_mask"] = (np.arange(length)[None, :] < rng.integers(3, length, (n, 1))).astype("int32")

        class Arrays(Task):
            name = "arrays"
            skip_padding = padded

            def build_model(self):
                return AlbertClassifier(AlbertEncoder(config), 3, dropout=0.0)

            def train_dataset(self, ctx, batch_size, skip):
                return tf.data.Dataset.from_tensor_slices(data).batch(batch_size, drop_remainder=True).repeat()

            def loss_and_terms(self, model, batch, normalizers, training):
                nll = classifier_nll(model({k: batch[k] for k in data if k != "label"}, training=training),
                                     batch["label"])
                return tf.reduce_sum(nll) / normalizers["examples"], {"nll_sum": tf.reduce_sum(nll),
                                                                      "count": tf.cast(tf.size(nll), tf.float32)}

            def train_metrics(self, totals):
                return {"loss": totals["nll_sum"] / totals["count"]}

            def eval_outputs(self, model, batch):
                return {"label": batch["label"], "logits": model({k: batch[k] for k in data if k != "label"})}

            def eval_dataset(self, batch_size):
                return tf.data.Dataset.from_tensor_slices(data).batch(batch_size)

        return Arrays()


def finetune_mirrored_vs_one_device():
    """The driver's step on a tiny AlbertClassifier, 2 replicas x 4 vs 1 x 8."""
    import keras

    from albert_tf import AlbertConfig
    from albert_tf.training.driver import Trainer, TrainingOptions

    config = AlbertConfig.from_preset("albert_tiny").replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                                             **MECHANICS)
    results = {}
    with _two_cpus() as strategies:
        for name, strategy in strategies:
            keras.utils.set_random_seed(7)
            task = ArrayClassification.make(config)
            trainer = Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=8, learning_rate=1e-3,
                                                    num_train_steps=100), strategy)
            iterator = _iterator(trainer, strategy)
            losses = [task.train_metrics(trainer.train(iterator, 1))["loss"] for _ in range(5)]
            results[name] = {"replicas": strategy.num_replicas_in_sync, "losses": losses}
    return results


def evaluation_over_two_replicas():
    """The driver's evaluation of 40 examples in batches of 16 over two replicas: the per-example
    outputs, the labels in order, and whether tf.data's autotuning was on in the datasets handed
    to the strategy, for the evaluation and for the training input (`_train_input`)."""
    from types import SimpleNamespace

    import numpy as np

    from albert_tf import AlbertConfig
    from albert_tf.training.driver import Trainer, TrainingOptions, _train_input

    config = AlbertConfig.from_preset("albert_tiny").replace(**MECHANICS)
    with _two_cpus() as strategies:
        strategy = dict(strategies)["mirrored"]
        task = ArrayClassification.make(config)
        trainer = Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=16), strategy)
        handed, original = [], strategy.experimental_distribute_dataset

        def distribute(dataset, *args, **kwargs):
            handed.append(dataset)
            return original(dataset, *args, **kwargs)

        strategy.experimental_distribute_dataset = distribute
        outputs = trainer.per_example_outputs(task.eval_dataset(16), 16)
        labels = np.concatenate([b["label"] for b in task.eval_dataset(40).as_numpy_iterator()])
        made, from_function = [], strategy.distribute_datasets_from_function

        def distribute_from(dataset_fn, *args, **kwargs):
            def recorded(context):
                made.append(dataset_fn(context))
                return made[-1]

            return from_function(recorded, *args, **kwargs)

        strategy.distribute_datasets_from_function = distribute_from
        next(_train_input(SimpleNamespace(task=task, options=trainer.options, strategy=strategy), 0))
    return {"outputs": outputs, "labels": labels, "autotune": [d.options().autotune.enabled for d in handed],
            "training_autotune": [d.options().autotune.enabled for d in made]}


def fit_mirrored_vs_one_device():
    """model.fit with albert_tf's LAMB: Keras must sum the replicas' gradients."""
    import keras
    import numpy as np
    import tensorflow as tf

    from albert_tf.data.maps import without_autotune
    from albert_tf.training.optimizer import LAMB

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 6)).astype("float32")
    y = (x @ rng.normal(size=(6, 1))).astype("float32")
    # batches of 8 in order, autotuning off (as `_iterator`)
    batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).with_options(without_autotune())
    results = {}
    with _two_cpus() as strategies:
        for name, strategy in strategies:
            keras.utils.set_random_seed(7)
            with strategy.scope():
                model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, activation="tanh"),
                                          keras.layers.Dense(1)])
                # a summed loss makes the replica sum visible: without the all-reduce each
                # replica would apply only its half of the gradient
                # jit_compile off: the point is Keras' all-reduce, which XLA does not change
                model.compile(optimizer=LAMB(learning_rate=0.01),
                              loss=keras.losses.MeanSquaredError(reduction="sum"), jit_compile=False)
            history = model.fit(batches, epochs=1, verbose=0, steps_per_epoch=5)
            results[name] = {"replicas": strategy.num_replicas_in_sync,
                             "losses": [float(v) for v in history.history["loss"]],
                             "weights": float(sum(np.abs(w).sum() for w in model.get_weights()))}
    return results


def weights_after_steps(task, strategy, slices, optimizer, steps=3, **options):
    """Trains `steps` steps of global batch 8 with --gradient_accumulation_steps=`slices`
    (weights drawn from seed 7); returns (initial, final) trainable weights ({path: numpy}),
    the Trainer and each step's summed terms."""
    import keras
    import numpy as np

    from albert_tf.training.driver import Trainer, TrainingOptions

    keras.utils.set_random_seed(7)
    values = dict(train_batch_size=8, optimizer=optimizer, learning_rate=0.01 if optimizer == "lamb" else 0.001,
                  num_train_steps=100, gradient_accumulation_steps=slices)
    values.update(options)
    trainer = Trainer(task, TrainingOptions(output_dir="unused", **values), strategy)
    initial = {v.path: np.array(v) for v in trainer.model.trainable_variables}
    iterator = _iterator(trainer, strategy)
    terms = [trainer.train(iterator, 1) for _ in range(steps)]
    return initial, {v.path: np.array(v) for v in trainer.model.trainable_variables}, trainer, terms


# The attention key bias adds the same q.b to every score of a query, which the softmax
# ignores: its true gradient is 0 and the computed one is rounding noise (1e-7 of the
# others), which Adam and LAMB scale to full-size steps. No two orders of computation (XLA
# or not, other hardware, slices) agree on it, so the comparisons leave it out.
ROUNDING_NOISE_ONLY = ("attention/key/bias",)


def relative_difference(weights, reference, reduce=max):
    """The largest (or `reduce`) per-variable ||weights - reference|| / ||reference||
    (float64) over the {path: array} dicts, leaving out ROUNDING_NOISE_ONLY."""
    import numpy as np

    assert weights.keys() == reference.keys()
    return reduce(float(np.linalg.norm(weights[k].astype("float64") - reference[k].astype("float64"))
                     / np.linalg.norm(reference[k].astype("float64")))
               for k in reference if not any(p in k for p in ROUNDING_NOISE_ONLY))


def median(values):
    import numpy as np

    return float(np.median(list(values)))


def accumulation_differences(records):
    """Under 2 mirrored replicas: for LAMB and AdamW and each task, K=2 vs K=1 after 3 steps
    (`difference`) and how far K=1 moved the weights (`moved`: the median variable's); a
    per-replica batch that K does not divide (`refused`: the Trainer's message)."""
    from albert_tf import AlbertConfig
    from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask

    config = AlbertConfig.from_preset("albert_tiny").replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                                             **MECHANICS)
    tasks = {"pretraining": lambda: PretrainingTask(PretrainingOptions(
                 config.replace(vocab_size=3000), records, max_seq_length=128, global_batch_size=8,
                 deterministic=True, random_seed=5, shuffle_buffer_size=100)),
             "classification": lambda: ArrayClassification.make(config)}
    results = {}
    with _two_cpus() as strategies:
        strategy = strategies[0][1]  # mirrored over /cpu:0 and /cpu:1
        # each optimizer with the task it serves (LAMB pretrains, AdamW fine-tunes): both optimizers
        # and both tasks, at half the suite time of every pair
        for name, optimizer in (("pretraining", "lamb"), ("classification", "adamw")):
            make = tasks[name]
            initial, whole, _, _ = weights_after_steps(make(), strategy, 1, optimizer)
            _, accumulated, trainer, _ = weights_after_steps(make(), strategy, 2, optimizer)
            results[f"{name}/{optimizer}"] = {"replicas": trainer.strategy.num_replicas_in_sync,
                                              "difference": relative_difference(accumulated, whole),
                                              "moved": relative_difference(initial, whole, median)}
        try:
            weights_after_steps(tasks["classification"](), strategy, 8, "adamw", steps=1)
        except ValueError as e:
            results["refused"] = str(e)
    return results


def remat_differences():
    """Under 2 mirrored replicas, dropout on: AdamW classification with padding skipped, --remat
    vs the plain run after 3 steps (`difference`, `moved` as accumulation_differences);
    `replica_masks_differ`: the same example on both replicas gives other training outputs."""
    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertConfig
    from albert_tf.modeling.encoder import INPUT_NAMES

    config = AlbertConfig.from_preset("albert_tiny").replace(**MECHANICS,
                                                             hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.2)
    with _two_cpus() as strategies:
        strategy = strategies[0][1]  # mirrored over /cpu:0 and /cpu:1
        initial, plain, _, _ = weights_after_steps(ArrayClassification.make(config, padded=True), strategy, 1,
                                                   "adamw")
        _, remat, trainer, _ = weights_after_steps(ArrayClassification.make(config, padded=True), strategy, 1,
                                                   "adamw", remat=True)
        results = {"replicas": trainer.strategy.num_replicas_in_sync, "remats": trainer.remats,
                   "skips_padding": trainer.skips_padding, "difference": relative_difference(remat, plain),
                   "moved": relative_difference(initial, plain, median)}
        encoder = trainer.model.encoder
        row = {k: v[:1] for k, v in next(iter(trainer.task.train_dataset(None, 8, 0))).items() if k in INPUT_NAMES}

        @tf.function
        def both_replicas():
            return strategy.run(lambda: encoder(row, training=True)["sequence_output"])

        first, second = (np.asarray(t) for t in strategy.experimental_local_results(both_replicas()))
    results["replica_masks_differ"] = bool(np.abs(first - second).max() > 1e-3)
    return results
