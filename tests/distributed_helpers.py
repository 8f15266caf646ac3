"""Run in a subprocess by tests/test_run_pretraining.py (it needs TensorFlow fresh).

    python tests/distributed_helpers.py mirrored_vs_one_device RECORDS...

    python tests/distributed_helpers.py finetune_mirrored_vs_one_device

Splits the CPU into 2 logical devices, trains the same 5 steps with MirroredStrategy
(2 replicas x 4 examples) and with one device (8 examples), and prints both loss lists as
JSON on the last line: the pretraining loop on RECORDS, or the fine-tuning loop.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def mirrored_vs_one_device(records):
    import keras
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    tf.config.experimental.enable_op_determinism()

    from albert_tf import AlbertConfig
    from albert_tf.data.pipeline import pretraining_dataset
    from albert_tf.training.loop import PretrainingLoop, metrics_from_totals

    config = AlbertConfig.from_preset("albert_tiny").replace(
        vocab_size=3000, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    results = {}
    for name, strategy in (("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])),
                           ("one_device", tf.distribute.OneDeviceStrategy("/cpu:0"))):
        keras.utils.set_random_seed(7)
        loop = PretrainingLoop(strategy, config, 8, learning_rate=0.01, num_train_steps=100, num_warmup_steps=0)

        def dataset_fn(context):
            return pretraining_dataset(records, context.get_per_replica_batch_size(8), 128, 20,
                                       deterministic=True, seed=5, shuffle_buffer_size=100)

        iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
        losses = [metrics_from_totals(loop.train(iterator, 1))["loss"] for _ in range(5)]
        results[name] = {"replicas": strategy.num_replicas_in_sync, "losses": losses}
    print(json.dumps(results))


def finetune_mirrored_vs_one_device(args):
    """The fine-tuning loop: 5 steps of a tiny AlbertClassifier, 2 replicas x 4 vs 1 x 8."""
    del args
    import keras
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    tf.config.experimental.enable_op_determinism()

    from albert_tf import AlbertConfig, AlbertEncoder
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.training.finetuning import FineTuningLoop

    config = AlbertConfig.from_preset("albert_tiny").replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    rng = np.random.default_rng(3)
    n, length = 40, 16
    inputs = {"input_word_ids": rng.integers(5, config.vocab_size, (n, length)).astype("int32"),
              "input_mask": np.ones((n, length), "int32"), "input_type_ids": np.zeros((n, length), "int32")}
    labels = rng.integers(0, 3, n).astype("int32")
    results = {}
    for name, strategy in (("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])),
                           ("one_device", tf.distribute.OneDeviceStrategy("/cpu:0"))):
        keras.utils.set_random_seed(7)
        with strategy.scope():
            model = AlbertClassifier(AlbertEncoder(config), 3, dropout=0.0)
        loop = FineTuningLoop(strategy, model, 8, learning_rate=1e-3, num_train_steps=100)

        def dataset_fn(context):
            return tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(
                context.get_per_replica_batch_size(8), drop_remainder=True).repeat()

        iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
        losses = [loop.train(iterator, 1) for _ in range(5)]
        results[name] = {"replicas": strategy.num_replicas_in_sync, "losses": losses}
    print(json.dumps(results))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"mirrored_vs_one_device": mirrored_vs_one_device,
     "finetune_mirrored_vs_one_device": finetune_mirrored_vs_one_device}[command](args)
