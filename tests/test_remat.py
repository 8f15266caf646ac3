"""--remat: each application of the encoder's shared (attention, feed-forward) pair keeps only
its input for the backward pass and recomputes the rest, drawing the same dropout masks.

With dropout on, the gradients of a remat forward equal the plain one's within 1e-5 per
variable (||difference|| / ||reference||; float32 with padding skipped, and mixed_bfloat16
without Grappler's rewrites), and the training driver's remat and plain runs end 3 steps
within 1e-5 of each other: pretraining with LAMB in 2 accumulated slices under XLA, and
classification with AdamW with padding skipped on 2 mirrored replicas; in mixed_bfloat16
with Grappler (as shipped) within bf16 rounding. The encoder's masks differ per site,
application, forward and replica and keep their rates; the gradient graph holds a recomputed
forward; nothing is added to checkpoints or weight files; run_pretraining and run_race train
with --remat and record it in run_info.json (run_classifier and run_squad_v1/v2 parse it into
the driver's options the same way), and an export traces the plain forward.
"""

import json
import os
import re

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import random_inputs, run_in_process, write_tiny_config
from tools import make_race_data
from distributed_helpers import ArrayClassification, median, relative_difference, weights_after_steps

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.modeling.encoder_block import AlbertAttention
from albert_tf.storage.checkpoints import random_states
from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask

TOLERANCE = 1e-5  # per variable ||difference|| / ||reference||
HIDDEN_RATE, ATTENTION_RATE = 0.3, 0.2


def config():
    """albert_tiny with 2 layers sharing one (attention, feed-forward) pair, dropout on."""
    return AlbertConfig.from_preset("albert_tiny").replace(num_hidden_layers=2, num_hidden_groups=1,
                                                           hidden_dropout_prob=HIDDEN_RATE,
                                                           attention_probs_dropout_prob=ATTENTION_RATE)


# --- the encoder -------------------------------------------------------------------------


def test_masks_differ_per_site_application_and_forward_and_keep_their_rates(monkeypatch):
    encoder = AlbertEncoder(config())
    masks = []
    draw = keras.random.dropout

    def recording(x, rate, noise_shape=None, seed=None):
        out = draw(x, rate, noise_shape=noise_shape, seed=seed)
        masks.append((rate, np.asarray(out) != 0, np.asarray(x) != 0))
        return out

    monkeypatch.setattr(keras.random, "dropout", recording)
    inputs = random_inputs(config(), batch=4, length=16, pad_from=(None,))
    forwards = []
    for _ in range(2):
        masks.clear()
        encoder(inputs, training=True)
        forwards.append(list(masks))
    # the embeddings' site, then per application (2, of one pair) the probabilities', attention
    # output's and feed-forward output's
    assert [rate for rate, _, _ in forwards[0]] == [HIDDEN_RATE] + [ATTENTION_RATE, HIDDEN_RATE, HIDDEN_RATE] * 2
    for sites in forwards:
        for i, (_, a, _) in enumerate(sites):
            for _, b, _ in sites[i + 1:]:
                assert a.shape != b.shape or not np.array_equal(a, b)  # no two sites share a mask
    for (_, first, _), (_, second, _) in zip(*forwards, strict=True):
        assert not np.array_equal(first, second)  # another step, other masks
    for rate in (HIDDEN_RATE, ATTENTION_RATE):
        kept = np.concatenate([m[x] for sites in forwards for r, m, x in sites if r == rate])
        assert kept.size > 5000 and abs((1 - kept.mean()) - rate) < 0.02, (rate, 1 - kept.mean())
    masks.clear()
    encoder(inputs, training=False)
    assert masks == []


def test_sub_layers_called_alone_keep_their_own_dropout():
    layer = AlbertAttention(hidden_size=8, num_attention_heads=2, attention_probs_dropout_prob=0.5,
                            hidden_dropout_prob=0.5)
    x, mask = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32"), np.ones((2, 5), "int32")
    first = np.asarray(layer(x, mask, training=True))
    state = np.array(layer.probs_dropout.seed_generator.state)
    assert not np.allclose(first, layer(x, mask, training=True))
    assert not np.array_equal(state, np.array(layer.probs_dropout.seed_generator.state))


def gradients(encoder, inputs, remat, seed=(11, 0)):
    """The gradients of a fixed random projection of sequence_output, with the encoder's dropout
    generator at `seed` first; also returns the traced graph."""
    encoder.configure_runtime(remat=remat)
    generator = encoder.dropout_layers()[0].seed_generator
    generator.state.assign(seed)

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            out = tf.cast(encoder(inputs, training=True)["sequence_output"], tf.float32)
            loss = tf.reduce_sum(out * tf.random.stateless_normal(tf.shape(out), [1, 2]))
        return tape.gradient(loss, encoder.trainable_variables)

    grads = step(inputs)
    graph = step.get_concrete_function(inputs).graph
    values = {v.path: np.asarray(tf.convert_to_tensor(g)) for v, g in zip(encoder.trainable_variables, grads)
              if g is not None}
    return values, graph


def test_remat_gradients_equal_the_plain_ones_and_the_graph_recomputes_each_application():
    """float32 with padding skipped (the hidden states come back from a gather, as IndexedSlices)."""
    encoder = AlbertEncoder(config())
    encoder.configure_runtime(skip_padding=True)
    inputs = random_inputs(config(), batch=4, length=16)
    plain, plain_graph = gradients(encoder, inputs, False)
    remat, remat_graph = gradients(encoder, inputs, True)
    assert len(plain) == len(encoder.trainable_variables) - 2  # all but the pooler's
    assert relative_difference(remat, plain) <= TOLERANCE
    training, inference = (np.asarray(encoder(inputs, training=t)["sequence_output"]) for t in (True, False))
    assert np.abs(training - inference).max() > 1e-2  # dropout acts
    # one softmax per application in the forward, and one more per application recomputed
    # in the backward pass: a forward that was not rematerialized has no second one
    softmaxes = [len([op for op in g.get_operations() if op.type == "Softmax"]) for g in (plain_graph, remat_graph)]
    assert softmaxes == [2, 4]


@pytest.mark.parametrize("remat", [False, True])
def test_shared_weight_gradients_are_summed_before_the_earlier_sub_layers_backward(remat):
    """Ordered gradients (docs/design_encoder.md#ordered-gradients-of-shared-weights): every partial sum of the
    shared feed-forward kernel's gradient (application by application, the last one the
    whole gradient) is computed before the word embeddings' gradient, the end of the
    backward pass, so TensorFlow cannot compute all L parts first and keep them; and before
    the attention's query kernel's, so each application's attention backward waits for its
    feed-forward's weight gradients to be summed (sub-layer by sub-layer: a pair's attention
    did not wait for its own feed-forward's sum). Without the ordering TensorFlow sums the L
    parts once, at the end, for nothing else to wait on. The gradients are the same."""
    encoder = AlbertEncoder(config().replace(num_hidden_layers=4))
    inputs = random_inputs(config(), batch=2, length=8)
    ordered, graph = gradients(encoder, inputs, remat)
    with encoder.runtime_options(ordered_gradients=False):
        unordered, unordered_graph = gradients(encoder, inputs, remat)
    assert relative_difference(ordered, unordered) <= 1e-6
    paths = [v.path for v in encoder.trainable_variables]
    kernel = encoder.trainable_variables[paths.index("group_0_inner_group_0_ffn/intermediate/kernel")]

    def ancestors(graph, name):
        """The ops the gradient of variable `name` is computed from."""
        seen, todo = set(), [graph.structured_outputs[paths.index(name)].op]
        while todo:
            op = todo.pop()
            if op.name not in seen:
                seen.add(op.name)
                todo.extend(t.op for t in op.inputs)
        return seen

    for g, waits in ((graph, True), (unordered_graph, False)):
        # the sums of the kernel's parts: TensorFlow's gradient aggregations (AddN) of its shape
        # ([H, I]; no other tensor has it)
        sums = {op.name for op in g.get_operations() if op.type == "AddN"
                and tuple(op.outputs[0].shape) == tuple(kernel.shape)}
        assert sums <= ancestors(g, kernel.path)
        assert len(sums) == (3 if waits else 1)  # 4 applications: added one by one, or all at once
        for later in ("embeddings/word_embeddings", "group_0_inner_group_0_attention/query/kernel"):
            assert (sums <= ancestors(g, later)) is waits, (waits, later, sorted(sums - ancestors(g, later)))


def test_mixed_bfloat16_remat_gradients_equal_the_plain_ones_without_graph_rewrites():
    """Grappler rewrites the two graphs differently: its remapper cannot fuse a matmul with the
    bias add and activation after it in a plain training forward, whose intermediate results
    the backward pass reads, but fuses them in a rematerialized forward, whose results nothing
    else reads (as in an inference forward): one bf16 rounding instead of several, so the
    gradients are a few 1e-3 apart (the driver test below). Without Grappler both graphs run
    the same ops and the gradients, of the weights cast once per forward too, are equal."""
    keras.utils.set_random_seed(5)
    encoder = AlbertEncoder(config(), dtype="mixed_bfloat16")
    inputs = random_inputs(config(), batch=4, length=16)
    before = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False)
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    try:
        plain, _ = gradients(encoder, inputs, False)
        remat, _ = gradients(encoder, inputs, True)
    finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": before})
    assert len(plain) == len(encoder.trainable_variables) - 2
    assert relative_difference(remat, plain) <= TOLERANCE


def test_seeds_and_remat_add_no_state(tmp_path):
    """Neither the per-forward seeds nor remat add variables or RNG states: the same weights,
    checkpoint variables, dropout RNG states and .weights.h5 entries as an encoder that never
    trained."""
    def described(encoder, name):
        checkpoint = tf.train.Checkpoint(encoder=encoder).write(str(tmp_path / name / "ckpt"))
        encoder.save_weights(str(tmp_path / f"{name}.weights.h5"))
        entries = []
        with h5py.File(tmp_path / f"{name}.weights.h5", "r") as f:
            f.visit(entries.append)
        unnumbered = lambda path: re.sub(r"seed_generator_\d+", "seed_generator", path)  # noqa: E731 (a global count)
        return ([v.path for v in encoder.weights], [unnumbered(v.path) for v in encoder.variables],
                len(random_states(encoder)), sorted(n for n, _ in tf.train.list_variables(checkpoint)),
                sorted(map(unnumbered, entries)))

    fresh = AlbertEncoder(config())
    fresh(random_inputs(config()))
    trained = AlbertEncoder(config())
    trained.configure_runtime(remat=True)
    with tf.GradientTape() as tape:
        out = trained(random_inputs(config()), training=True)["pooled_output"]
    assert all(g is not None for g in tape.gradient(out, trained.trainable_variables))
    assert described(trained, "trained") == described(fresh, "fresh")
    assert len(random_states(fresh)) == 4  # the embeddings' Dropout, the attention's 2, the feed-forward's 1


# --- the driver ----------------------------------------------------------------------------


def pretraining_task(records):
    return PretrainingTask(PretrainingOptions(config().replace(vocab_size=3000), list(records), max_seq_length=128,
                                              global_batch_size=8, deterministic=True, random_seed=5,
                                              shuffle_buffer_size=100))


def check_dropout_acts(trainer):
    """The trained encoder's training forward differs from its inference forward and from
    another training forward: the runs compared did draw dropout masks."""
    batch = next(iter(trainer.task.train_dataset(None, 8, 0)))
    inputs = {k: batch[k] for k in INPUT_NAMES}
    encoder = trainer.model.encoder
    first, second, inference = (np.asarray(encoder(inputs, training=t)["pooled_output"]) for t in (True, True, False))
    assert np.abs(first - inference).max() > 1e-3 and np.abs(first - second).max() > 1e-3


def check_remat_run(make_task, optimizer, **options):
    """3 driver steps plain and with --remat from the same weights and RNG states; asserts the
    weights agree per variable within TOLERANCE, moved far more, and dropout acted. Returns the
    remat trainer and both runs' weights."""
    strategy = tf.distribute.get_strategy()
    initial, plain, plain_trainer, plain_terms = weights_after_steps(make_task(), strategy, options.pop("slices", 1),
                                                                     optimizer, **options)
    slices = plain_trainer.options.gradient_accumulation_steps
    start, remat, trainer, terms = weights_after_steps(make_task(), strategy, slices, optimizer, remat=True, **options)
    assert trainer.remats and not plain_trainer.remats
    assert all(np.array_equal(start[k], initial[k]) for k in initial)
    assert relative_difference(initial, plain, median) > 1e-3  # the steps moved the weights
    assert relative_difference(remat, plain) <= TOLERANCE
    for got, want in zip(terms, plain_terms, strict=True):
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-5, abs=1e-6), key
    check_dropout_acts(trainer)
    return trainer, plain, remat


def test_pretraining_with_lamb_in_2_slices_under_xla(pretraining_records):
    outputs, _ = pretraining_records
    trainer, _, _ = check_remat_run(lambda: pretraining_task(outputs), "lamb", slices=2, jit_compile=True)
    assert trainer.options.gradient_accumulation_steps == 2
    # each slice's gradient pass is the XLA program, with the recomputed forwards in it
    batch = {k: v[:4] for k, v in next(iter(trainer.task.train_dataset(None, 8, 0))).items()}
    hlo = trainer._gradients_fn.experimental_get_compiler_ir(batch, {"mlm_weight": tf.constant(8.0)})(stage="hlo")
    assert "HloModule" in hlo


def test_classification_with_adamw_padding_skipped_in_mixed_bfloat16():
    """In bf16 a rematerialized forward is fused like an inference forward and the plain training
    forward is not (the bf16 test above), so the runs differ by bf16 rounding. Measured after 3
    steps: the worst variable 3e-3 apart, the median one 5e-4, where a bf16 run is 0.8 and 3e-2
    from the float32 run (biases that start at 0 took 3 Adam steps of either sign) and the steps
    moved the median variable by 0.37 (what lost gradients, e.g. of the weights cast once per
    forward, would leave)."""
    make = lambda: ArrayClassification.make(config(), padded=True)  # noqa: E731
    strategy = tf.distribute.get_strategy()
    initial, plain, _, _ = weights_after_steps(make(), strategy, 1, "adamw", dtype_policy="mixed_bfloat16")
    _, remat, trainer, _ = weights_after_steps(make(), strategy, 1, "adamw", dtype_policy="mixed_bfloat16",
                                               remat=True)
    assert trainer.precision.policy == "mixed_bfloat16" and trainer.remats and trainer.skips_padding
    assert relative_difference(initial, plain, median) > 1e-3
    assert relative_difference(remat, plain) < 0.02 and relative_difference(remat, plain, median) < 0.005
    check_dropout_acts(trainer)


def test_two_mirrored_replicas():
    """Classification with AdamW, padding skipped, on 2 replicas (the CPU split in two logical devices:
    conftest)."""
    from distributed_helpers import remat_differences

    results = remat_differences()
    assert results["replicas"] == 2 and results["remats"] and results["skips_padding"]
    assert results["moved"] > 1e-3, results
    assert results["difference"] <= TOLERANCE, results
    # the same example on both replicas: other dropout masks on each
    assert results["replica_masks_differ"]


# --- the commands --------------------------------------------------------------------------


def test_every_training_command_takes_remat_and_records_it(pretraining_records, spm_model, tmp_path):
    """One optimizer step of run_pretraining (which also exports) and of run_race with --remat,
    each through its main in this process; run_classifier and run_squad_v1/v2 parse --remat into the driver's
    options through their options records as run_race does (the driver, not the
    command, rematerializes: tested above)."""
    from absl import flags

    from albert_tf import run_classifier, run_squad_v1, run_squad_v2

    for module in (run_classifier, run_squad_v1, run_squad_v2):
        values = flags.FlagValues()
        module.define_flags(values)
        entry = run_squad_v1 if module is run_squad_v2 else module
        values([module.__name__, "--output_dir=x", "--remat"])
        assert entry.options_from_flags(values)[1].remat is True, module.__name__
        values([module.__name__, "--output_dir=x", "--noremat"])
        assert entry.options_from_flags(values)[1].remat is False, module.__name__

    outputs, _ = pretraining_records
    config_file = write_tiny_config(tmp_path, num_hidden_layers=2)  # a group each
    race = make_race_data
    race.make_race(tmp_path / "race", num_articles=2, seed=7, layout="files")
    common = ["--dtype_policy=float32", "--train_batch_size=4", "--remat", "--iterations_per_loop=1"]
    fine_tuning = common + [f"--albert_config_file={config_file}", f"--spm_model_file={spm_model}", "--do_train",
                            "--save_checkpoints_steps=1"]
    cases = [
        ("albert_tf.run_pretraining", common + [f"--albert_config_file={config_file}", f"--input_file={outputs[0]}",
                                                "--max_seq_length=128", "--num_train_steps=1", "--do_eval=false",
                                                f"--output_dir={tmp_path / 'pretraining'}",
                                                f"--spm_model_file={spm_model}",
                                                f"--export_dir={tmp_path / 'export'}"]),
        ("albert_tf.run_race", fine_tuning + [f"--data_dir={tmp_path / 'race'}", "--max_seq_length=64",
                                              "--max_qa_length=32", "--train_step=1", "--warmup_step=0",
                                              f"--output_dir={tmp_path / 'race_out'}"]),
    ]
    import importlib

    results = [run_in_process(importlib.import_module(module), args) for module, args in cases]
    for (module, args), result in zip(cases, results, strict=True):
        assert result.returncode == 0, (module, result.stderr[-3000:])
        output_dir = next(a.split("=", 1)[1] for a in args if a.startswith("--output_dir="))
        assert json.load(open(os.path.join(output_dir, "run_info.json")))["remat"] is True, module
    # the export of a model trained with --remat is traced with the plain forward: no recomputing
    # gradient functions, which a SavedModel cannot hold (loading it would warn of unsaved
    # custom gradients)
    assert b"internal_grad_fn" not in (tmp_path / "export" / "encoder" / "saved_model.pb").read_bytes()
