"""How far a bf16 gradient is from float32's, part by part (issue 29's "rule the rest in or
out by measurement").

    python benchmarks/precision_gradient_bench.py [--data_dir=DIR] [--init_checkpoint=RUN_DIR] \\
        [--windows=256] [--output_dir=results/precision_gradient]

The SQuAD v1.1 model of benchmarks/precision_learning_bench.py (H 128, L 2 all-shared, E 32,
2 heads, I 256) on the first --windows training windows of its --kind=people data (made in
--data_dir by that benchmark's make_data, or reused from there): one float32 model and one
mixed_bfloat16 model holding the same float32 weights (random, seed 1, or a run's newest
checkpoint with --init_checkpoint, e.g. a float32 run that stayed on the plateau), dropout
off, the same batch. For each variant of the
bf16 model, the gradient of the mean SQuAD loss against the float32 model's, per variable:
relative error ||g_bf16 - g_f32|| / ||g_f32||, and over all variables at once. Variants (each
one change to the shipped bf16 model, made from outside, the library untouched):

    shipped          the code as it is (attention core, residual stream, layer norms,
                     embeddings, heads and losses in float32; dense layers in bf16, bias
                     gradients accumulated in float32)
    gelu_float32     the feed-forward's tanh GELU computed in float32 (its input, the
                     intermediate matmul's bf16 output, cast up; the result cast back to bf16
                     for the output matmul)
    no_padding_skip  every position computed (padding skipping off)

and, as the floor, float32 against float32 with padding skipping off (the same math in
another summation order). A part whose variant moves the error by much less than the
shipped error is ruled out as a cause.

Writes results.json and results.csv (one row per variant and variable group) in --output_dir.
"""

import os
import sys

import numpy as np

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(BENCH, ".."))
if ROOT not in sys.path:  # run as a script: this checkout's albert_tf
    sys.path.insert(0, ROOT)

from albert_tf import entry_points  # light: albert_tf.cli is imported when main runs

GROUPS = {"all": "", "word_embeddings": "embeddings/word_embeddings", "query_kernel": "attention/query/kernel",
          "ffn_intermediate_kernel": "ffn/intermediate/kernel", "ffn_intermediate_bias": "ffn/intermediate/bias",
          "attention_output_kernel": "attention/dense/kernel", "span_head": "squad/"}


def define_flags(flag_values):
    from absl import flags

    flags.DEFINE_string("data_dir", None, "precision_learning_bench's data folder (made here when absent).",
                        flag_values=flag_values)
    flags.DEFINE_string("init_checkpoint", None, "A run_squad_v1 output_dir of that model: its newest checkpoint "
                        "(default: random weights, seed 1).", flag_values=flag_values)
    flags.DEFINE_integer("windows", 256, "Training windows in the one batch.", flag_values=flag_values)
    flags.DEFINE_string("output_dir", "results/precision_gradient", "Where results go.", flag_values=flag_values)


def relative_error(ours, reference):
    """||ours - reference|| / ||reference|| over paired lists of arrays (0 when both are 0)."""
    diff = sum(float(np.sum((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
               for a, b in zip(ours, reference, strict=True))
    norm = sum(float(np.sum(np.asarray(b, np.float64) ** 2)) for b in reference)
    return 0.0 if norm == 0 else (diff / norm) ** 0.5


def gelu_in_float32(model):
    """The feed-forward activations of `model` computed in float32 (input cast up, result
    cast back to the layer's compute dtype)."""
    from keras import ops

    from albert_tf.modeling.encoder_block import gelu_tanh

    def gelu(y):
        return ops.cast(gelu_tanh(ops.cast(y, "float32")), y.dtype)

    encoder = model.encoder
    for ffn in encoder.ffn_layers:
        ffn.intermediate.activation = gelu
    return model


def run(f):
    sys.path.insert(0, BENCH)
    import keras
    import tensorflow as tf

    import precision_learning_bench as plb
    from albert_tf.tasks.squad.cache import load_or_build_features, read_feature_arrays
    from albert_tf.tasks.squad.features import FeatureSettings
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.modeling.qa_heads import squad_v1_loss
    from albert_tf.modeling.question_answering import AlbertForQuestionAnswering
    from albert_tf.storage import atomic
    from albert_tf.storage.checkpoints import latest_prefix
    from albert_tf.training.precision import choose, policy_scope

    if f.windows < 1:
        raise ValueError(f"--windows must be positive, got {f.windows}.")
    out = f.output_dir
    os.makedirs(out, exist_ok=True)
    data_dir = f.data_dir or os.path.join(out, "data")
    p = plb.make_data(data_dir, plb.SETTINGS[False], [("squad_v1", "random")])
    config = AlbertConfig.from_json_file(p["config"]).replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    tokenizer = SentencePieceTokenizer(p["spm"])
    cache = load_or_build_features(p["squad_1.1_train"], os.path.join(data_dir, "gradient_train_v1.tf_record"),
                                   tokenizer, FeatureSettings(128, 48, 24, True, "v1"))
    arrays = read_feature_arrays(cache.feature_file)
    n = min(f.windows, cache.num_features)
    batch = {"input_word_ids": arrays["input_ids"][:n], "input_mask": arrays["input_mask"][:n],
             "input_type_ids": arrays["segment_ids"][:n]}
    batch = {k: tf.constant(np.asarray(v, np.int32)) for k, v in batch.items()}
    starts, ends = (tf.constant(np.asarray(arrays[k][:n], np.int32)) for k in ("start_positions", "end_positions"))

    def build(policy):
        with policy_scope(policy):
            model = AlbertForQuestionAnswering(config, version="v1", dropout_prob=0.0)
        model(batch, training=False)
        return model

    keras.utils.set_random_seed(1)
    reference = build("float32")
    if f.init_checkpoint:
        prefix = latest_prefix(f.init_checkpoint)
        if prefix is None:
            raise ValueError(f"--init_checkpoint={f.init_checkpoint} holds no checkpoint (ckpt-N).")
        tf.train.Checkpoint(model=reference).read(prefix).expect_partial()
    weights = reference.get_weights()

    def gradients(model):
        with tf.GradientTape() as tape:
            out = model(batch, training=False)
            loss = tf.reduce_mean(squad_v1_loss(out["start_logits"], out["end_logits"], starts, ends,
                                                per_example=True))
        grads = tape.gradient(loss, model.trainable_variables)
        # (the pooler, which the span head does not read, has no gradient: left out)
        return {v.path: np.asarray(tf.convert_to_tensor(g), np.float64) for v, g in
                zip(model.trainable_variables, grads, strict=True) if g is not None}, float(loss)

    truth, truth_loss = gradients(reference)
    variants = {}
    floor = build("float32")
    floor.set_weights(weights)
    floor.configure_runtime(skip_padding=False)
    variants["float32_no_padding_skip (floor)"] = floor
    for name in ("shipped", "gelu_float32", "no_padding_skip"):
        model = build("mixed_bfloat16")
        model.set_weights(weights)
        if name == "gelu_float32":
            gelu_in_float32(model)
        if name == "no_padding_skip":
            model.configure_runtime(skip_padding=False)
        variants[name] = model
    rows = []
    for name, model in variants.items():
        grads, loss = gradients(model)
        for group, key in GROUPS.items():
            paths = [path for path in truth if key in path]
            error = relative_error([grads[path] for path in paths], [truth[path] for path in paths])
            rows.append({"variant": name, "variables": group, "count": len(paths), "relative_error": error,
                         "loss": loss, "float32_loss": truth_loss})
        print(f"{name:<32} all {rows[-len(GROUPS)]['relative_error']:.4f}  " + "  ".join(
            f"{r['variables']} {r['relative_error']:.4f}" for r in rows[-len(GROUPS) + 1:]), flush=True)
    native = choose("auto")
    atomic.write_json(os.path.join(out, "results.json"), {
        "hardware": native.hardware, "windows": n, "init_checkpoint": f.init_checkpoint or "random (seed 1)",
        "model": plb.MODEL, "rows": rows})
    atomic.write_csv(os.path.join(out, "results.csv"), rows)
    print(f"wrote {out}/results.json and results.csv", flush=True)
    return 0


main, entry = entry_points.command("precision_gradient_bench", define_flags, run)


if __name__ == "__main__":
    entry()
