"""What the encoder's default path computes, per case, as digests (bit equality) and sums (how
far): tests/test_encoder_pieces.py runs this file against commit d5fa711's albert_tf (its
PYTHONPATH) and compares with the same computed in the test by the checkout's.

    PYTHONPATH=<a tree of d5fa711> python tests/encoder_reference.py --v0_2_0=DIR --output=FILE.npz

Cases: "demo", configs/albert_demo.json's encoder (seed 1, every weight moved by N(0, 0.02)) on a
batch of the demo's shape (seq 128; 4 rows of lengths 128, 77, 9, 40, two segments), and
"demo_dropout", the same with dropout 0.1 (the dropout generator at a fixed state); "v0_2_0",
the encoder of 0.2.0's pretrained/ directory on outputs.npz's inputs. Per case: the training=False
outputs, and in a tf.function the training=True outputs and the gradients of a fixed projection
of them: per group one SHA-256 of its arrays and each array's float64 sum (`record`).
"""

import argparse
import hashlib
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEMO_CONFIG = os.path.join(HERE, "..", "configs", "albert_demo.json")


def demo_inputs():
    rng = np.random.default_rng(3)
    lengths = np.array([128, 77, 9, 40])
    mask = (np.arange(128)[None] < lengths[:, None]).astype("int32")
    ids = rng.integers(5, 5000, size=(4, 128)).astype("int32") * mask
    types = ((np.arange(128)[None] >= lengths[:, None] // 2) * mask).astype("int32")
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def v0_2_0_inputs(directory):
    with np.load(os.path.join(directory, "outputs.npz")) as data:
        return {k[len("inputs_"):]: data[k] for k in ("inputs_input_word_ids", "inputs_input_mask",
                                                      "inputs_input_type_ids")}


def demo_encoder(dropout):
    import keras

    from albert_tf import AlbertConfig, AlbertEncoder

    config = AlbertConfig.from_json_file(DEMO_CONFIG)
    if dropout:
        config = config.replace(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    keras.utils.set_random_seed(1)
    encoder = AlbertEncoder(config)
    rng = np.random.default_rng(1)
    for v in encoder.weights:
        v.assign(np.asarray(v) + rng.normal(0, 0.02, v.shape).astype("float32"))
    return encoder


def v0_2_0_encoder(directory):
    from albert_tf.modeling.pretrainer import AlbertPretrainer

    return AlbertPretrainer.from_pretrained(os.path.join(directory, "pretrained")).encoder


def values(encoder, inputs):
    """{name: float32 array} of the default path on `inputs`."""
    import tensorflow as tf

    out = {f"inference_{k}": v for k, v in flat_outputs(encoder(inputs, training=False)).items()}
    for layer in encoder._dropout_layers() if hasattr(encoder, "_dropout_layers") else encoder.dropout_layers():
        if getattr(layer, "seed_generator", None) is not None:
            layer.seed_generator.state.assign([17, 0])

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            outputs = encoder(inputs, training=True)
            sequence = outputs["sequence_output"]
            loss = (tf.reduce_sum(sequence * tf.random.stateless_normal(tf.shape(sequence), [1, 2]))
                    + tf.reduce_sum(outputs["pooled_output"] ** 2))
        return outputs, tape.gradient(loss, encoder.trainable_variables)

    outputs, grads = step({k: tf.constant(v) for k, v in inputs.items()})
    out.update({f"training_{k}": v for k, v in flat_outputs(outputs).items()})
    out.update({f"gradient_{v.path}": tf.convert_to_tensor(g) for v, g in zip(encoder.trainable_variables, grads)})
    return {k: np.asarray(v, "float32") for k, v in out.items()}


def flat_outputs(outputs):
    flat = {k: outputs[k] for k in ("sequence_output", "pooled_output")}
    flat.update({f"encoder_outputs_{i}": x for i, x in enumerate(outputs["encoder_outputs"])})
    return flat


def cases(v0_2_0_dir):
    """{case: (encoder, inputs)}."""
    return {"demo": (demo_encoder(False), demo_inputs()), "demo_dropout": (demo_encoder(True), demo_inputs()),
            "v0_2_0": (v0_2_0_encoder(v0_2_0_dir), v0_2_0_inputs(v0_2_0_dir))}


def record(case, arrays):
    """{f"{case}/{group}/sha256": one digest of the group's arrays (bit equality),
    f"{case}/{group}/sums": their float64 sums (how far), in name order} per group (inference,
    training, gradient)."""
    out = {}
    for group in ("inference", "training", "gradient"):
        names = sorted(k for k in arrays if k.startswith(group + "_"))
        digest = hashlib.sha256()
        for name in names:
            digest.update(name.encode() + np.ascontiguousarray(arrays[name], "float32").tobytes())
        out[f"{case}/{group}/sha256"] = np.array(digest.hexdigest().encode())
        out[f"{case}/{group}/sums"] = np.array([arrays[name].astype("float64").sum() for name in names])
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--v0_2_0", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    records = {}
    for case, (encoder, inputs) in cases(args.v0_2_0).items():
        records.update(record(case, values(encoder, inputs)))
    np.savez_compressed(args.output, **records)


if __name__ == "__main__":
    main()
