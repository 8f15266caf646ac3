"""One cell of benchmarks/memory_bench.py, run in a fresh process: builds one system's
pretraining model and optimizer at one size, sequence length, micro-batch and policy, runs
training steps, and prints one JSON line with its memory and step times.

    python benchmarks/memory_cell.py '{"system": "albert_tf", "size": "base", "seq": 128, "batch": 8,
                                       "policy": "float32", "remat": false, "steps": 2}'

Systems: "albert_tf" (the training driver's step: AlbertPretrainer, masked LM + sentence
order, the release's LAMB, global-norm clipping; "remat": true is --remat), "keras_hub"
(AlbertMaskedLM with keras.optimizers.Lamb, train_on_batch, compiled as Keras compiles it by
default), "hf" (transformers' AlbertForPreTraining with torch.optim.AdamW, masked LM + sentence
order, "remat": true is gradient_checkpointing_enable(); runs in benchmarks/.peers-venv, see
make_peers_venv.sh). Every system gets the same random batch: T = seq, B = batch, 15% of the
positions predicted (at least 20), the dropout of the preset (0 for the v2 presets).

Memory is the process's resident set (Linux /proc/self/status): `baseline` after the model
and the optimizer's slots exist, before any step; the peak (VmHWM, reset after a warm-up
step that traces) over the timed steps. "policy": "mixed_bfloat16" computes in bf16 with
float32 variables (albert_tf and keras-hub: the Keras policy; hf: torch.autocast on the CPU).

Only the standard library is imported before the system's own framework, so the hf cell
runs in an environment without TensorFlow.
"""

import json
import os
import sys
import time

SIZES = ("tiny", "base", "large", "xlarge", "xxlarge")


def _status():
    values = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) * 1024
    return values


def rss():
    """Resident bytes now."""
    return _status()["VmRSS"]


def peak():
    """The resident high-water mark in bytes (since the last reset_peak)."""
    return _status()["VmHWM"]


def reset_peak():
    """Sets the high-water mark to the current resident size (Linux clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def predictions_for(seq):
    """Masked positions per sequence: 15% of T, at least the release's 20."""
    return max(20, int(round(0.15 * seq)))


def albert_dims(size):
    """The preset's dims as plain values (hf builds its own config from them)."""
    if size == "tiny":
        return dict(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    hidden, layers, heads, intermediate = {"base": (768, 12, 12, 3072), "large": (1024, 24, 16, 4096),
                                           "xlarge": (2048, 24, 16, 8192), "xxlarge": (4096, 12, 64, 16384)}[size]
    return dict(vocab_size=30000, embedding_size=128, hidden_size=hidden, num_hidden_layers=layers,
                num_attention_heads=heads, intermediate_size=intermediate, hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0)


def random_batch(cell, vocab_size):
    """numpy arrays of one micro-batch: ids, mask, types, masked positions/ids/weights, order label."""
    import numpy as np

    batch, seq = cell["batch"], cell["seq"]
    predictions = predictions_for(seq)
    rng = np.random.default_rng(0)
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq), predictions, replace=False) for _ in range(batch)]), 1)
    return {
        "input_word_ids": rng.integers(5, vocab_size, (batch, seq)).astype("int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "input_type_ids": np.concatenate([np.zeros((batch, seq // 2)), np.ones((batch, seq - seq // 2))], 1
                                         ).astype("int32"),
        "masked_lm_positions": positions.astype("int32"),
        "masked_lm_ids": rng.integers(5, vocab_size, (batch, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((batch, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype("int32"),
    }


def _albert_tf(cell):
    """-> (parameters, step()) for albert_tf's driver step."""
    import tensorflow as tf

    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask
    from albert_tf.training.driver import Trainer, TrainingOptions

    config = AlbertConfig.from_preset("albert_tiny" if cell["size"] == "tiny" else f"albert_{cell['size']}")
    config = config.replace(**albert_dims(cell["size"]))
    task = PretrainingTask(PretrainingOptions(config, [], max_seq_length=cell["seq"],
                                              max_predictions_per_seq=predictions_for(cell["seq"]),
                                              global_batch_size=cell["batch"]))
    trainer = Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=cell["batch"], optimizer="lamb",
                                            learning_rate=1e-4, num_train_steps=10**6, dtype_policy=cell["policy"],
                                            remat=cell["remat"]))
    iterator = iter(tf.data.Dataset.from_tensors(random_batch(cell, config.vocab_size)).repeat())
    parameters = sum(int(v.shape.num_elements()) for v in trainer.model.trainable_variables)
    return parameters, lambda: trainer.train(iterator, 1)


def _keras_hub(cell):
    """-> (parameters, step()) for keras-hub's AlbertMaskedLM train_on_batch."""
    import keras
    import keras_hub
    import numpy as np

    if cell["remat"]:
        raise ValueError("keras-hub's AlbertMaskedLM has no rematerialization option")
    dims = albert_dims(cell["size"])
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=dims["vocab_size"], num_layers=dims["num_hidden_layers"],
        num_heads=dims["num_attention_heads"], embedding_dim=dims["embedding_size"], hidden_dim=dims["hidden_size"],
        intermediate_dim=dims["intermediate_size"], dropout=dims["hidden_dropout_prob"],
        max_sequence_length=512, dtype=cell["policy"])
    model = keras_hub.models.AlbertMaskedLM(backbone=backbone, preprocessor=None, dtype=cell["policy"])
    model.compile(optimizer=keras.optimizers.Lamb(learning_rate=1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.optimizer.build(model.trainable_variables)
    b = random_batch(cell, dims["vocab_size"])
    x = {"token_ids": b["input_word_ids"], "segment_ids": b["input_type_ids"], "padding_mask": b["input_mask"],
         "mask_positions": b["masked_lm_positions"]}
    parameters = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    return parameters, lambda: model.train_on_batch(x, b["masked_lm_ids"], sample_weight=b["masked_lm_weights"])


def _hf(cell):
    """-> (parameters, step()) for transformers' AlbertForPreTraining with AdamW."""
    import contextlib
    import importlib

    # the peers' environment's packages, never albert_tf's dependencies (see hf_peer.py)
    torch = importlib.import_module("torch")
    transformers = importlib.import_module("transformers")

    dims = albert_dims(cell["size"])
    config = transformers.AlbertConfig(
        vocab_size=dims["vocab_size"], embedding_size=dims["embedding_size"], hidden_size=dims["hidden_size"],
        num_hidden_layers=dims["num_hidden_layers"], num_attention_heads=dims["num_attention_heads"],
        intermediate_size=dims["intermediate_size"], hidden_act="gelu_new",
        hidden_dropout_prob=dims["hidden_dropout_prob"],
        attention_probs_dropout_prob=dims["attention_probs_dropout_prob"],
        max_position_embeddings=512, type_vocab_size=2)
    model = transformers.AlbertForPreTraining(config)
    model.train()
    if cell["remat"]:
        if not getattr(model, "supports_gradient_checkpointing", False):
            raise ValueError(f"transformers {transformers.__version__}: AlbertForPreTraining does not support "
                             "gradient checkpointing")
        model.gradient_checkpointing_enable()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for p in model.parameters():  # the slots exist before the baseline, as in the other systems
        p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    b = random_batch(cell, dims["vocab_size"])
    labels = torch.full((cell["batch"], cell["seq"]), -100, dtype=torch.long)
    positions = torch.as_tensor(b["masked_lm_positions"], dtype=torch.long)
    labels.scatter_(1, positions, torch.as_tensor(b["masked_lm_ids"], dtype=torch.long))
    inputs = {"input_ids": torch.as_tensor(b["input_word_ids"], dtype=torch.long),
              "attention_mask": torch.as_tensor(b["input_mask"], dtype=torch.long),
              "token_type_ids": torch.as_tensor(b["input_type_ids"], dtype=torch.long),
              "labels": labels, "sentence_order_label": torch.as_tensor(b["next_sentence_labels"][:, 0],
                                                                          dtype=torch.long)}
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if cell["policy"] == "mixed_bfloat16"
                else contextlib.nullcontext())

    def step():
        with autocast:
            loss = model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return sum(p.numel() for p in model.parameters() if p.requires_grad), step


BUILDERS = {"albert_tf": _albert_tf, "keras_hub": _keras_hub, "hf": _hf}


def tensor_device():
    """"GPU:0" where TensorFlow sees a GPU (the step's tensors live there, so its allocator
    is the one to read), else "CPU:0"."""
    import tensorflow as tf

    return "GPU:0" if tf.config.list_physical_devices("GPU") else "CPU:0"


def tensor_memory(device, reset=False):
    """TensorFlow's allocator on `device` (`tensor_device()`): (bytes of live tensors now,
    their peak since the last reset), or None where it keeps no statistics (oneDNN off: the
    plain C allocator). With oneDNN on (the default on x86) the CPU allocator is a BFC pool,
    as on a GPU: the resident set keeps the pool's high-water mark (freed blocks are never
    handed back, even after malloc_trim) and its fragmentation, while these are the live
    bytes, the figure a GPU's get_memory_info gives."""
    import tensorflow as tf

    try:
        if reset:
            tf.config.experimental.reset_memory_stats(device)
        info = tf.config.experimental.get_memory_info(device)
    except ValueError:  # "Allocator stats not available" (TF_ENABLE_ONEDNN_OPTS=0)
        return None
    return info["current"], info["peak"]


def run_cell(cell):
    """Builds the cell's system and runs a warm-up step and `steps` timed steps; returns the record."""
    start_rss = rss()
    parameters, step = BUILDERS[cell["system"]](cell)
    baseline = rss()
    started = time.perf_counter()
    step()  # traces / compiles / allocates once
    first = time.perf_counter() - started
    warmup_peak = peak()
    reset_peak()
    device = tensor_device() if "tensorflow" in sys.modules else None  # None: the hf cell
    tensors_before = None if device is None else tensor_memory(device, reset=True)
    times = []
    for _ in range(cell["steps"]):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    record = dict(cell, parameters=parameters, rss_after_imports=start_rss, baseline_rss=baseline,
                  warmup_peak_rss=warmup_peak, peak_rss=peak(), first_step_seconds=first, step_seconds=times)
    if tensors_before is not None:  # live tensors between steps (weights, slots) and the steps' peak
        record.update(tensor_device=device, tensor_baseline=tensors_before[0], tensor_peak=tensor_memory(device)[1])
    return record


def main(argv):
    cell = json.loads(argv[1])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if cell["system"] != "hf":
        sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))
    # imports before the baseline: the framework itself is not the cell's memory
    if cell["system"] == "hf":
        import importlib

        for name in ("torch", "transformers"):
            importlib.import_module(name)
    else:
        import keras  # noqa: F401
        import tensorflow  # noqa: F401
    try:
        record = run_cell(cell)
    except ValueError as e:  # a setting the system does not have
        record = dict(cell, unsupported=str(e))
    print("MEMORY_CELL " + json.dumps(record), flush=True)


if __name__ == "__main__":
    main(sys.argv)
