"""The models tests/test_backends.py runs on every Keras backend, in one definition that the
TensorFlow side (the pytest process) and tests/backends_worker.py (a JAX or PyTorch process
where TensorFlow cannot be imported) share: Keras, keras.ops and numpy only.

Each case is a tiny model (L = 2, H 32, V 100, T 16) of one kind, sharing mode, group layout,
dtype policy and run-time options; `build` makes it, `save` writes it as its pretrained
directory, `load` reads it back, `inputs` gives its batch and `scalar` the number whose
gradient the backends compare.
"""

import zlib

import keras
import numpy as np
from keras import ops

BATCH, LENGTH, VOCAB = 2, 16, 100
CLASSIFIER_WEIGHTS = "classifier.weights.h5"  # AlbertClassifier.WEIGHTS_FILE

# name -> (kind, AlbertConfig overrides, dtype policy, run-time options). One shape for all (E 16,
# H 32, I 64): JAX compiles each eager op once per shape.
CASES = {
    "encoder": ("encoder", dict(num_hidden_groups=2, inner_group_num=2, sharing="attention"), None, {}),
    # the plain forward: every run-time piece off (EncoderRuntime.plain())
    "encoder_plain": ("encoder", {}, None, dict(rows=False, cast_once=False, ordered_gradients=False,
                                                 dropout_seeds=False)),
    "pretrainer": ("pretrainer", dict(sharing="none"), None, {}),
    "classifier": ("classifier", dict(sharing="ffn"), None, {}),
    "squad_v1": ("squad_v1", {}, None, {"remat": True}),
    "squad_v2": ("squad_v2", {}, None, {}),
    "multiple_choice": ("multiple_choice", {}, None, {}),
    "pretrainer_bf16": ("pretrainer", {}, "mixed_bfloat16", {"remat": True}),
}


def config(name):
    """The case's AlbertConfig (no dropout: outputs in training are the same on every backend)."""
    from albert_tf.modeling.config import AlbertConfig

    values = dict(vocab_size=VOCAB, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=64, max_position_embeddings=32)
    values.update(CASES[name][1])
    return AlbertConfig(**values)


def _new(name, cfg):
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.encoder import AlbertEncoder
    from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice
    from albert_tf.modeling.pretrainer import AlbertPretrainer
    from albert_tf.modeling.question_answering import AlbertForQuestionAnswering

    kind, _, dtype, _ = CASES[name]
    if kind == "encoder":
        return AlbertEncoder(cfg, dtype=dtype)
    if kind == "pretrainer":
        return AlbertPretrainer(cfg, dtype=dtype)
    if kind == "classifier":
        return AlbertClassifier(AlbertEncoder(cfg, name="encoder"), num_classes=3, dropout=0.0)
    if kind == "multiple_choice":
        return AlbertForMultipleChoice(cfg, dropout_prob=0.0)
    return AlbertForQuestionAnswering(cfg, version=kind[-2:], start_n_top=3, end_n_top=2, dropout_prob=0.0)


def build(name, seed):
    """A new model of the case, its weights drawn from `seed`, its run-time options set."""
    keras.utils.set_random_seed(seed)
    model = _new(name, config(name))
    model.configure_runtime(**CASES[name][3])
    return model


def save(model, directory):
    """The case's pretrained directory: albert_config.json and the model's weights file."""
    if hasattr(model, "save_pretrained"):
        return model.save_pretrained(directory)
    import os

    from albert_tf.storage import atomic

    model.config.to_json_file(os.path.join(directory, "albert_config.json"))
    with atomic.output_path(os.path.join(directory, CLASSIFIER_WEIGHTS)) as tmp:
        model.save_weights(tmp)
    return directory


def weights_file(model):
    return getattr(model, "WEIGHTS_FILE", None) or CLASSIFIER_WEIGHTS


def load(name, directory):
    """The case's model read from its pretrained directory (from_pretrained where the class has it)."""
    import os

    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.config import AlbertConfig
    from albert_tf.modeling.encoder import AlbertEncoder
    from albert_tf.modeling.multiple_choice import AlbertForMultipleChoice
    from albert_tf.modeling.pretrainer import AlbertPretrainer
    from albert_tf.modeling.question_answering import AlbertForQuestionAnswering
    from albert_tf.storage.weights_file import load_weights_file

    kind, _, dtype, runtime = CASES[name]
    if kind == "encoder":
        model = AlbertEncoder.from_pretrained(directory, dtype=dtype)
    elif kind == "pretrainer":
        model = AlbertPretrainer.from_pretrained(directory, dtype=dtype)
    elif kind == "multiple_choice":
        model = AlbertForMultipleChoice.from_pretrained(directory)
    elif kind == "classifier":
        cfg = AlbertConfig.from_json_file(os.path.join(directory, "albert_config.json"))
        model = AlbertClassifier(AlbertEncoder(cfg, name="encoder"), num_classes=3, dropout=0.0)
        load_weights_file(model, os.path.join(directory, CLASSIFIER_WEIGHTS), directory)
    else:
        model = AlbertForQuestionAnswering.from_pretrained(directory)
    model.configure_runtime(**runtime)
    return model


def inputs(name, seed=0):
    """The case's batch (numpy): padded rows (row 1 from position 11), segment ids, and what the
    kind reads beside the encoder's three inputs ([B, C, T] for multiple choice, C = 3)."""
    kind = CASES[name][0]
    rng = np.random.default_rng(seed)
    shape = (BATCH, 3, LENGTH) if kind == "multiple_choice" else (BATCH, LENGTH)
    ids = rng.integers(5, VOCAB, shape).astype("int32")
    mask = np.ones(shape, "int32")
    mask[1, ..., 11:] = 0
    types = np.zeros(shape, "int32")
    types[..., LENGTH // 2:] = 1
    batch = {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": types * mask}
    if kind == "pretrainer":
        batch["masked_lm_positions"] = np.array([[1, 4, 9], [2, 3, 0]], "int32")
    if kind == "squad_v2":
        p_mask = np.zeros(shape, "int32")
        p_mask[:, 1:4] = 1
        batch["p_mask"] = p_mask
        batch["start_positions"] = np.array([5, 7], "int32")
    return batch


def flatten(outputs, prefix=""):
    """Nested outputs (dicts, lists, tensors) -> {"name/0": tensor} in a fixed order."""
    if isinstance(outputs, dict):
        items = sorted(outputs.items())
    elif isinstance(outputs, (list, tuple)):
        items = [(str(i), o) for i, o in enumerate(outputs)]
    else:
        return {prefix or "output": outputs}
    flat = {}
    for key, value in items:
        flat.update(flatten(value, f"{prefix}/{key}" if prefix else key))
    return flat


def probe(name, shape):
    """Fixed pseudo-random weights [shape] for output `name` (the same in every process)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return rng.standard_normal(tuple(int(d) for d in shape)).astype("float32")


def scalar(outputs):
    """sum over the float outputs o of sum(o * probe(o)): a float32 scalar whose gradient
    reaches every weight (integer outputs, e.g. top-k indices, take no part)."""
    total = 0.0
    for key, value in flatten(outputs).items():
        if "int" in str(value.dtype):
            continue
        weights = ops.convert_to_tensor(probe(key, value.shape))
        total = total + ops.sum(ops.multiply(ops.cast(value, "float32"), weights))
    return total


def tolerance(name):
    """Allowed |difference| as a fraction of the scale (the largest |value| of an output; of all
    the gradients): float32 1e-5, mixed_bfloat16 2e-2."""
    return 2e-2 if CASES[name][2] == "mixed_bfloat16" else 1e-5


def numpy_release_update(w, m, v, g, lr, decay, trust, b1=0.9, b2=0.999, eps=1e-6, wd=0.01):
    """The release's LAMB (trust) / AdamWeightDecay step in float64 numpy, written from
    shared/ALBERT_REFERENCE.md section 5 (not from albert_tf): the new (w, m, v)."""
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    u = m / (np.sqrt(v) + eps)
    if decay:
        u = u + wd * w
    r = 1.0
    if trust:
        wn, un = np.linalg.norm(w), np.linalg.norm(u)
        r = wn / un if wn > 0 and un > 0 else 1.0
    return w - lr * r * u, m, v


# (decay, trust ratio, starts at zero): a LAMB kernel, a bias (neither), AdamWeightDecay's kernel,
# a LAMB kernel at zero (its trust ratio falls back to 1)
LAMB_VARIABLES = ((True, True, False), (False, False, False), (True, False, False), (True, True, True))


def lamb_problem(steps=3, shape=(4, 3)):
    """Initial weights and each step's gradients (float32) of `LAMB_VARIABLES`."""
    rng = np.random.default_rng(7)
    weights = [np.zeros(shape, "float32") if zero else rng.normal(size=shape).astype("float32")
               for _, _, zero in LAMB_VARIABLES]
    grads = [[rng.normal(scale=0.1, size=shape).astype("float32") for _ in LAMB_VARIABLES] for _ in range(steps)]
    return weights, grads
