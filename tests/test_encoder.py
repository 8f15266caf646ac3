import collections
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder
from albert_tf.modeling.encoder import count_parameters
from albert_tf.modeling.runtime import EncoderRuntime
from albert_tf.modeling.encoder_block import AlbertAttention, AlbertFeedForward
from conftest import random_inputs
from harness import (
    assert_all_close,
    check_config_round_trip,
    check_saved_model_round_trip,
    check_variable_lengths,
    to_numpy,
)

# tf.train.Checkpoint(encoder=AlbertEncoder(albert_tiny)) variable paths: a documented,
# stable contract (converters and init_checkpoint depend on it).
TINY_CHECKPOINT_PATHS = sorted(
    [
        "encoder/embeddings/word_embeddings",
        "encoder/embeddings/position_embeddings",
        "encoder/embeddings/token_type_embeddings",
        "encoder/embeddings/layer_norm/gamma",
        "encoder/embeddings/layer_norm/beta",
        "encoder/embedding_projection/_kernel",
        "encoder/embedding_projection/bias",
        "encoder/pooler/_kernel",
        "encoder/pooler/bias",
    ]
    + [
        f"encoder/group_{g}_inner_group_0_attention/{sub}/{var}"
        for g in (0, 1)
        for sub in ("query", "key", "value", "dense")
        for var in ("_kernel", "bias")
    ]
    + [f"encoder/group_{g}_inner_group_0_attention/layer_norm/{v}" for g in (0, 1) for v in ("gamma", "beta")]
    + [
        f"encoder/group_{g}_inner_group_0_ffn/{sub}/{var}"
        for g in (0, 1)
        for sub in ("intermediate", "output_dense")
        for var in ("_kernel", "bias")
    ]
    + [f"encoder/group_{g}_inner_group_0_ffn/layer_norm/{v}" for g in (0, 1) for v in ("gamma", "beta")]
)


def no_dropout(config):
    return config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def test_output_structure_and_shapes(tiny_config):
    encoder = AlbertEncoder(tiny_config)
    outputs = encoder(random_inputs(tiny_config, batch=2, length=9))
    assert outputs["sequence_output"].shape == (2, 9, 32)
    assert outputs["pooled_output"].shape == (2, 32)
    assert len(outputs["encoder_outputs"]) == tiny_config.num_hidden_layers
    np.testing.assert_array_equal(outputs["encoder_outputs"][-1], outputs["sequence_output"])
    pooled = np.asarray(outputs["pooled_output"])
    assert np.all(np.abs(pooled) <= 1.0)  # tanh pooler


def test_padding_does_not_change_real_positions(tiny_config):
    encoder = AlbertEncoder(no_dropout(tiny_config))
    short = random_inputs(tiny_config, batch=1, length=6, pad_from=(None,))
    padded = {k: np.pad(v, ((0, 0), (0, 10))) for k, v in short.items()}
    padded["input_word_ids"][:, 6:] = 77  # garbage behind the mask must not leak in
    a, b = to_numpy(encoder(short)), to_numpy(encoder(padded))
    np.testing.assert_allclose(a["sequence_output"], b["sequence_output"][:, :6], atol=1e-5)
    np.testing.assert_allclose(a["pooled_output"], b["pooled_output"], atol=1e-5)


@pytest.mark.parametrize("sharing", ["all", "none"])
def test_skipping_padding_gives_the_same_outputs_and_gradients(tiny_config, sharing):
    """The padding-skipping forward (per-token work on the real tokens only) equals the padded
    one at real positions, in pooled_output and in every gradient of a loss on them; padded
    positions become zeros. Also under tf.function with the batch's shape unknown."""
    config = no_dropout(tiny_config).replace(sharing=sharing)
    encoder = AlbertEncoder(config)
    inputs = random_inputs(config, batch=4, length=12, pad_from=(None, 7, 1, 3))
    inputs["input_word_ids"][1, 7:] = 77  # garbage behind the mask
    real = inputs["input_mask"][..., None] > 0

    def loss_and_grads(skip):
        assert encoder.configure_runtime(skip_padding=skip)
        with tf.GradientTape() as tape:
            out = encoder(inputs, training=True)
            loss = tf.reduce_sum(out["pooled_output"] ** 2) + tf.reduce_sum(tf.where(real, out["sequence_output"], 0.0))
        return to_numpy(out), tape.gradient(loss, encoder.trainable_variables)

    (padded, padded_grads), (skipped, skipped_grads) = loss_and_grads(False), loss_and_grads(True)
    encoder.configure_runtime(skip_padding=False)
    for a, b in zip(padded["encoder_outputs"], skipped["encoder_outputs"]):
        np.testing.assert_allclose(np.where(real, a, 0), b, atol=1e-5, rtol=0)
    assert np.all(skipped["sequence_output"][~real[..., 0]] == 0)
    assert np.abs(padded["sequence_output"][~real[..., 0]]).max() > 0.1  # the padded run does compute padding
    np.testing.assert_allclose(padded["pooled_output"], skipped["pooled_output"], atol=1e-5, rtol=0)
    for v, a, b in zip(encoder.trainable_variables, padded_grads, skipped_grads):
        a, b = tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy()
        np.testing.assert_allclose(a, b, atol=1e-5 * max(1.0, np.abs(a).max()), rtol=0, err_msg=v.path)

    spec = {k: tf.TensorSpec([None, None], tf.int32) for k in inputs}
    with encoder.runtime_options(skip_padding=True) as applied:
        assert applied and encoder.runtime.skip_padding
        fn = tf.function(lambda x: encoder(x)["pooled_output"], input_signature=[spec])
        traced = fn({k: tf.constant(v) for k, v in inputs.items()}).numpy()
    assert not encoder.runtime.skip_padding  # restored
    np.testing.assert_allclose(padded["pooled_output"], traced, atol=1e-5, rtol=0)


def test_a_call_works_on_rows(tiny_config):
    """Every per-token op runs on rows [B * T, H]: each Dense is a 2-D MatMul feeding its
    BiasAdd directly (the pattern TensorFlow fuses with the GELU into one oneDNN kernel; a
    [B, T, H] Dense puts a reshape between them)."""
    encoder = AlbertEncoder(no_dropout(tiny_config))
    inputs = random_inputs(tiny_config, batch=3, length=12)
    spec = {k: tf.TensorSpec([None, None], tf.int32) for k in inputs}
    graph = tf.function(lambda x: encoder(x)["pooled_output"]).get_concrete_function(spec).graph
    bias_adds = [op for op in graph.get_operations() if op.type == "BiasAdd"]
    # per layer Q, K, V, output, intermediate, output_dense; the embedding projection; the pooler
    assert len(bias_adds) == 6 * tiny_config.num_hidden_layers + 2, [op.name for op in bias_adds]
    for op in bias_adds:
        producer = op.inputs[0].op
        assert producer.type == "MatMul" and producer.inputs[0].shape.rank == 2, (op.name, producer.type)


def test_dropout_only_in_training(tiny_config):
    assert tiny_config.hidden_dropout_prob > 0
    encoder = AlbertEncoder(tiny_config)
    inputs = random_inputs(tiny_config)
    assert_all_close(encoder(inputs), encoder(inputs, training=False), atol=0)
    assert_all_close(encoder(inputs, training=False), encoder(inputs, training=False), atol=0)
    a = to_numpy(encoder(inputs, training=True))["sequence_output"]
    b = to_numpy(encoder(inputs, training=False))["sequence_output"]
    assert np.abs(a - b).max() > 1e-3


def test_variable_lengths_up_to_max_positions(tiny_config):
    encoder = AlbertEncoder(tiny_config)
    lengths = (1, 7, 33, tiny_config.max_position_embeddings)
    check_variable_lengths(encoder, lambda t: random_inputs(tiny_config, batch=2, length=t, pad_from=(None,)), lengths)
    too_long = random_inputs(tiny_config, batch=1, length=tiny_config.max_position_embeddings + 1)
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
        encoder(too_long)


def test_rank_is_checked(tiny_config):
    encoder = AlbertEncoder(tiny_config)
    inputs = random_inputs(tiny_config)
    bad = {k: v[:, :, None] for k, v in inputs.items()}
    with pytest.raises(ValueError, match="rank 2"):
        encoder.embeddings(bad["input_word_ids"], bad["input_type_ids"])


def test_config_and_keras_save_round_trip(tiny_config, tmp_path):
    encoder = AlbertEncoder(tiny_config, name="enc")
    config = encoder.get_config()
    assert set(config) == {"name", "trainable", "dtype", "config", "use_one_hot_embeddings"}
    rebuilt = check_config_round_trip(encoder)
    assert rebuilt.config == tiny_config
    restored = check_saved_model_round_trip(encoder, random_inputs(tiny_config), str(tmp_path))
    assert restored.config == tiny_config


def test_one_hot_lookup_matches_gather(tiny_config):
    config = no_dropout(tiny_config)
    gather = AlbertEncoder(config)
    one_hot = AlbertEncoder(config, use_one_hot_embeddings=True)
    one_hot.set_weights(gather.get_weights())
    inputs = random_inputs(config)
    assert_all_close(gather(inputs), one_hot(inputs), atol=1e-5)


def test_checkpoint_paths_are_stable(tiny_config, tmp_path):
    encoder = AlbertEncoder(tiny_config)
    path = tf.train.Checkpoint(encoder=encoder).write(str(tmp_path / "ckpt"))
    names = sorted(
        n.replace("/.ATTRIBUTES/VARIABLE_VALUE", "")
        for n, _ in tf.train.list_variables(path)
        if n.endswith("VARIABLE_VALUE")
    )
    assert names == TINY_CHECKPOINT_PATHS
    # restoring into a fresh encoder gives the same outputs
    fresh = AlbertEncoder(tiny_config)
    tf.train.Checkpoint(encoder=fresh).read(path).assert_existing_objects_matched()
    inputs = random_inputs(tiny_config)
    assert_all_close(encoder(inputs), fresh(inputs), atol=0)


def _layer_counts(config):
    routing = config.routing()
    return (
        len({a for steps in routing for a, _ in steps}),
        len({f for steps in routing for _, f in steps}),
    )


@pytest.mark.parametrize("sharing", ["all", "attention", "ffn", "none"])
@pytest.mark.parametrize("embedding_size", [16, 32])
def test_variable_count_per_sharing_strategy(tiny_config, sharing, embedding_size):
    config = tiny_config.replace(sharing=sharing, embedding_size=embedding_size, num_hidden_groups=1)
    encoder = AlbertEncoder(config)
    L, H, I, E, V = 4, 32, 64, embedding_size, 1000
    attention_vars, ffn_vars = 4 * 2 + 2, 2 * 2 + 2
    n_attention = 1 if sharing in ("all", "attention") else L
    n_ffn = 1 if sharing in ("all", "ffn") else L
    projection = 2 if E != H else 0
    assert len(encoder.weights) == 5 + projection + n_attention * attention_vars + n_ffn * ffn_vars + 2
    attention_params = 4 * (H * H + H) + 2 * H
    ffn_params = H * I + I + I * H + H + 2 * H
    expected = (
        V * E + 128 * E + 2 * E + 2 * E
        + (E * H + H if E != H else 0)
        + n_attention * attention_params
        + n_ffn * ffn_params
        + H * H + H
    )
    assert encoder.count_params() == expected == count_parameters(config)


def _pending_variables():
    """Ids of the variables Keras holds to initialize when the next top-level StatelessScope
    ends (variables made in `StatelessScope(initialize_variables=False)`)."""
    from keras.src.backend.common import global_state

    return [id(v) for v in global_state.get_global_attribute("uninitialized_variables") or []]


def test_count_parameters_leaves_keras_nothing_to_initialize_later():
    # Keras keeps every variable made under StatelessScope(initialize_variables=False) and
    # initializes them all when a later top-level StatelessScope ends (model.fit's first
    # build): count_parameters' encoders would then cost their full weights there.
    from albert_tf import AlbertConfig

    with keras.StatelessScope(initialize_variables=False):  # someone else's pending variable stays
        keras.Variable(keras.initializers.Zeros(), shape=(2,))
    before = _pending_variables()
    assert len(before) >= 1
    assert count_parameters(AlbertConfig.from_preset("albert_base")) == 11_683_584
    assert _pending_variables() == before
    with keras.StatelessScope():  # what model.fit's symbolic build enters: initializes the pending ones
        pass
    assert _pending_variables() == []


def applications(encoder, inputs):
    """{sub-layer name: how many times one forward applies it}."""
    counts = collections.Counter()

    def counting(cls):
        original = cls.call

        def call(layer, *args, **kwargs):
            counts[layer.name] += 1
            return original(layer, *args, **kwargs)

        return mock.patch.object(cls, "call", call)

    with counting(AlbertAttention), counting(AlbertFeedForward):
        encoder(inputs)
    return dict(counts)


def _copy_shared_into_unshared(shared, unshared):
    """Gives `unshared` (sharing="none") the weights of `shared` (sharing="all"): every
    per-layer block a copy of the one shared block."""
    for name in ("embeddings", "embedding_projection", "pooler"):
        getattr(unshared, name).set_weights(getattr(shared, name).get_weights())
    (attention,), (ffn,) = shared.attention_layers, shared.ffn_layers
    for layer in unshared.attention_layers:
        layer.set_weights(attention.get_weights())
    for layer in unshared.ffn_layers:
        layer.set_weights(ffn.get_weights())


def test_all_shared_reuses_one_block_and_accumulates_its_gradient(tiny_config):
    L = 4
    config = no_dropout(tiny_config).replace(num_hidden_groups=1, num_hidden_layers=L)
    shared = AlbertEncoder(config)
    assert [l.name for l in shared.attention_layers] == ["group_0_inner_group_0_attention"]
    assert [l.name for l in shared.ffn_layers] == ["group_0_inner_group_0_ffn"]
    # the single block is applied once per layer
    inputs = random_inputs(config)
    assert applications(shared, inputs) == {"group_0_inner_group_0_attention": L, "group_0_inner_group_0_ffn": L}

    # the same network unrolled: L unshared blocks, each a copy of the shared one
    unshared = AlbertEncoder(config.replace(sharing="none"))
    assert len(unshared.attention_layers) == len(unshared.ffn_layers) == L
    _copy_shared_into_unshared(shared, unshared)
    assert_all_close(shared(inputs), unshared(inputs), atol=1e-5)

    rng = np.random.default_rng(0)
    probe_seq = rng.normal(size=(3, 12, 32)).astype("float32")
    probe_pooled = rng.normal(size=(3, 32)).astype("float32")

    def gradients(encoder, layers):
        variables = [layer.trainable_weights for layer in layers]
        with tf.GradientTape() as tape:
            out = encoder(inputs, training=True)
            loss = (tf.reduce_sum(out["sequence_output"] * probe_seq)
                    + tf.reduce_sum(out["pooled_output"] * probe_pooled))
        flat = tape.gradient(loss, [v for vs in variables for v in vs])
        grads, i = [], 0
        for vs in variables:
            grads.append([tf.convert_to_tensor(g).numpy() for g in flat[i : i + len(vs)]])
            i += len(vs)
        return grads

    for kind in ("attention_layers", "ffn_layers"):
        (shared_grads,) = gradients(shared, getattr(shared, kind))
        per_layer = gradients(unshared, getattr(unshared, kind))
        names = [v.path.split("/", 1)[1] for v in getattr(shared, kind)[0].trainable_weights]
        assert len(shared_grads) == len(names) > 0
        for i, (name, g) in enumerate(zip(names, shared_grads)):
            contributions = [grads[i] for grads in per_layer]
            assert len(contributions) == L
            total = np.sum(contributions, axis=0)
            if name == "key/bias":
                # adds the same score to every key of a query: softmax ignores it, so its
                # gradient is zero up to rounding, in both encoders
                largest = max(np.abs(x).max() for x in shared_grads)
                assert np.abs(g).max() < 1e-6 * largest and np.abs(total).max() < 1e-6 * largest
                continue
            # every application contributes, and not the same amount
            assert all(np.abs(c).max() > 0 for c in contributions), (kind, name)
            assert np.abs(contributions[0] - contributions[-1]).max() > 1e-3 * np.abs(total).max(), (kind, name)
            # the shared variable's gradient is the sum over the L applications
            scale = np.abs(total).max()
            np.testing.assert_allclose(g, total, atol=1e-4 * scale, rtol=1e-3, err_msg=f"{kind} {name}")
            assert np.abs(g - contributions[-1]).max() > 1e-2 * scale, (kind, name)


def test_grouped_sharing_routes_layers_like_the_release(tiny_config):
    # L=4, G=2, k=2: layers 0,1 -> group 0; layers 2,3 -> group 1; both inner blocks each.
    config = no_dropout(tiny_config).replace(num_hidden_groups=2, inner_group_num=2)
    encoder = AlbertEncoder(config)
    names = sorted(l.name for l in encoder.attention_layers)
    assert names == [f"group_{g}_inner_group_{k}_attention" for g in (0, 1) for k in (0, 1)]
    by_name = {l.name: l for l in encoder.attention_layers}
    inputs = random_inputs(config)
    assert applications(encoder, inputs) == {f"group_{g}_inner_group_{k}_{kind}": 2
                                             for g in (0, 1) for k in (0, 1) for kind in ("attention", "ffn")}
    before = to_numpy(encoder(inputs))["encoder_outputs"]
    layer = by_name["group_1_inner_group_1_attention"].dense
    layer.kernel.assign(layer.kernel * 3.0)  # (a constant bias would vanish in the LayerNorm)
    after = to_numpy(encoder(inputs))["encoder_outputs"]
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])
    assert np.abs(before[2] - after[2]).max() > 1e-3


def test_no_projection_when_embedding_equals_hidden(tiny_config):
    encoder = AlbertEncoder(tiny_config.replace(embedding_size=32))
    assert encoder.embedding_projection is None
    assert not any("embedding_hidden_mapping_in" in v.path for v in encoder.weights)


def test_numerics_follow_reference(tiny_config):
    encoder = AlbertEncoder(tiny_config)
    for layer in encoder._flatten_layers():
        if isinstance(layer, keras.layers.LayerNormalization):
            assert layer.epsilon == 1e-12, layer.path
    ffn = encoder.ffn_layers[0]
    x = np.linspace(-4, 4, 9).astype("float32")
    tanh_gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(ffn.intermediate.activation(x), tanh_gelu, atol=1e-6)
    # truncated normal 0.02: no value beyond two standard deviations
    big = AlbertEncoder(tiny_config.replace(vocab_size=20000))
    table = np.asarray(big.embeddings.word_embeddings)
    assert np.abs(table).max() <= 0.04 + 1e-6
    assert abs(table.std() - 0.02 * 0.8796) < 1e-3  # std of a 2-sigma truncated normal
    np.testing.assert_array_equal(np.asarray(encoder.pooler.bias), 0)


def test_runtime_options_are_options_not_architecture(tiny_config, tmp_path):
    """Run-time options come from the constructor or configure_runtime / runtime_options, are
    refused when unknown, stay out of get_config and the weights, and models holding an
    encoder forward them to it (one without an AlbertEncoder takes none)."""
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.modeling.pretrainer import AlbertPretrainer

    encoder = AlbertEncoder(tiny_config, runtime={"skip_padding": True})
    assert encoder.runtime == EncoderRuntime(skip_padding=True)
    assert "runtime" not in encoder.get_config() and "skip_padding" not in str(encoder.get_config())
    assert AlbertEncoder.from_config(encoder.get_config()).runtime == EncoderRuntime()
    with pytest.raises(TypeError, match="unknown encoder run-time option.*skip_pading"):
        encoder.configure_runtime(skip_pading=False)
    with pytest.raises(TypeError, match="replica_index must be None or a callable"):
        encoder.configure_runtime(replica_index=0)
    assert encoder.runtime == EncoderRuntime(skip_padding=True)  # a refused change changes nothing

    pretrainer = AlbertPretrainer(tiny_config, runtime=EncoderRuntime(remat=True))
    assert pretrainer.runtime is pretrainer.encoder.runtime and pretrainer.runtime.remat
    with pretrainer.tracing_for_export() as applied:
        assert applied and pretrainer.encoder.runtime == EncoderRuntime(remat=False, ordered_gradients=False)
    assert pretrainer.encoder.runtime == EncoderRuntime(remat=True)  # restored

    classifier = AlbertClassifier(AlbertEncoder(tiny_config), 2)
    assert classifier.configure_runtime(skip_padding=True) and classifier.encoder.runtime.skip_padding

    class Foreign(keras.layers.Layer):  # an encoder that is no AlbertEncoder (as an export's TFSMLayer)
        def call(self, inputs):
            first = keras.ops.expand_dims(inputs["input_word_ids"][:, 0], -1)  # [B, 1]
            return {"pooled_output": keras.ops.cast(first, "float32")}

    foreign = AlbertClassifier(Foreign(), 2)
    assert foreign.runtime is None and not foreign.configure_runtime(remat=True)
    with foreign.runtime_options(skip_padding=True) as applied:
        assert applied is False
    with pytest.raises(TypeError, match="unknown encoder run-time option"):
        foreign.configure_runtime(remat_all=True)


def test_missing_inputs_are_named(tiny_config):
    encoder = AlbertEncoder(tiny_config)
    inputs = random_inputs(tiny_config)
    del inputs["input_mask"]
    with pytest.raises(ValueError, match="missing inputs input_mask"):
        encoder(inputs)
