"""Length buckets (--length_buckets) and the training loss of every task that accepts them:
the same weights and the same examples, each task's `loss_and_terms` on the batch its
training pipeline cuts to the bucket width against the same batch at --max_seq_length, in
float32 with dropout off. The loss is the training one (training=True: the v2 head gives
its training outputs, the end conditioned on the gold start, only then) with every dropout
rate 0 (encoder config and head), checked by computing it twice.

Tolerance: the real positions see the same numbers either way (padding is masked in
attention with -10000 and, in the v2 head, with p_mask's -1e30, which float32 exp turns
into exact zeros), but the matrix products and softmax sums reduce over W instead of T
positions, and a kernel may add the same nonzero terms in another order (blocking and
vectorisation depend on the length): float32 rounding, a few ulps (1 ulp = 1.2e-7
relative) per sum. The losses are compared at rtol 1e-5 (about 100 ulps, room for the
rounding of a few layers) and atol 1e-6. The models are random albert_tiny ones drawn
with initializer_range INIT_RANGE (ten times ALBERT's 0.02: at 0.02 attention is nearly
uniform, a tiny random encoder barely notices its context and the heads' logits are ~0),
and every test first checks that padding let into attention (input_mask all ones) moves
the loss by more than 100 times the tolerance: the comparison would notice padding
reaching the real positions.

The SQuAD v1 head is the exception, as the flag's help and docs/fine_tuning.md say: its start/end
softmax runs over every position of the batch (the release masks nothing there), so with
buckets the padding past the bucket width is left out of it. Its bucketed loss is exactly
the release's loss on the full batch's logits restricted to the first W positions, and
smaller than the full-padding loss; that is what is tested.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from conftest import write_tiny_config
from tools import make_race_data, make_squad_data

from albert_tf.data.buckets import bucketed_batches, cut_to_width
from albert_tf.training.driver import Trainer, TrainingOptions
from albert_tf.training.task import EXAMPLE_INDEX

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SEQ = 128
BATCH = 8
RTOL, ATOL = 1e-5, 1e-6
INIT_RANGE = 0.2
TOPICS = os.path.join(ROOT, "notebooks", "data", "docstring_topics")


def _model(task, skip_padding=None):
    """The float32 model a Trainer builds for `task`; skip_padding None keeps the driver's
    choice for the task (padding skipped in the encoder for classification and RACE),
    False computes the padding as XLA and TPUs do."""
    trainer = Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=BATCH, eval_batch_size=BATCH,
                                            dtype_policy="float32"))
    assert trainer.precision.policy == "float32"
    if skip_padding is None:
        assert trainer.skips_padding == task.skip_padding
    else:
        assert trainer.model.configure_runtime(skip_padding=skip_padding)
    assert trainer.model.runtime.skip_padding == (task.skip_padding and skip_padding is None)
    return trainer.model


def _loss(task, model, batch):
    """task.loss_and_terms on one batch (the training loss; every dropout rate is 0) ->
    (loss, {term: value}) as floats."""
    batch = {k: tf.convert_to_tensor(v) for k, v in batch.items()}
    normalizers = {k: tf.cast(v, tf.float32) for k, v in task.loss_normalizers(batch).items()}
    loss, terms = task.loss_and_terms(model, batch, normalizers, training=True)
    return float(loss), {k: float(v) for k, v in terms.items()}


def _check_setup(task, model, full):
    """No dropout left (the same loss twice), and the loss notices padding let into
    attention (the full batch with input_mask all ones) by far more than the tolerance."""
    loss = _loss(task, model, full)
    assert _loss(task, model, full) == loss
    leaky = _loss(task, model, dict(full, input_mask=np.ones_like(full["input_mask"])))[0]
    assert abs(leaky - loss[0]) > 100 * (RTOL * abs(loss[0]) + ATOL), (loss[0], leaky)


def _assert_same_loss(full, cut, where):
    (loss_full, terms_full), (loss_cut, terms_cut) = full, cut
    np.testing.assert_allclose(loss_cut, loss_full, rtol=RTOL, atol=ATOL, err_msg=f"loss, {where}")
    assert terms_cut.keys() == terms_full.keys()
    for key in terms_full:
        np.testing.assert_allclose(terms_cut[key], terms_full[key], rtol=RTOL, atol=ATOL, err_msg=f"{key}, {where}")


def _pairs(full_batches, cut_batches, seq=SEQ):
    """The batches of the two pipelines side by side, checked to hold the same examples."""
    pairs = []
    for full, cut in zip(full_batches, cut_batches, strict=True):
        full = {k: v.numpy() for k, v in full.items()}
        cut = {k: v.numpy() for k, v in cut.items()}
        np.testing.assert_array_equal(full[EXAMPLE_INDEX], cut[EXAMPLE_INDEX])
        assert full["input_word_ids"].shape[-1] == seq
        width = cut["input_word_ids"].shape[-1]
        assert width <= seq and not full["input_mask"][..., width:].any()  # only padding was cut
        pairs.append((full, cut, width))
    assert any(width < seq for _, _, width in pairs), "no batch was narrower than max_seq_length"
    assert len({width for _, _, width in pairs}) > 1, "the batches have one width"
    return pairs


def _tiny_config(tmp_path, **overrides):
    """albert_tiny at two layers (a group each) with the test SentencePiece model's 3000
    pieces, initializer_range INIT_RANGE, no dropout."""
    directory = tmp_path / "config"
    directory.mkdir()
    return write_tiny_config(directory, initializer_range=INIT_RANGE, num_hidden_layers=2, **overrides)


# --- SQuAD ----------------------------------------------------------------------------------


def _squad(spm_model, tmp_path, version):
    """(task with buckets, [(full batch, cut batch, width)]): training features of a
    generated SQuAD file, batched with the task's own training finalize (cut_to_width of
    its sequence inputs) in one pass by length, so both pipelines hold the same examples
    per batch."""
    from albert_tf.tasks.squad.features import convert_examples_to_features, features_to_arrays
    from albert_tf.tasks.squad.reading import read_squad_examples
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.tasks.squad.task import SEQUENCE_INPUTS, SquadOptions, SquadTask, _feature_columns

    path = tmp_path / "train.json"
    path.write_text(json.dumps(make_squad_data.make_dataset("2.0" if version == "v2" else "1.1", 24,
                                                                          seed=4, max_context_chars=400)),
                    encoding="utf-8")
    features = convert_examples_to_features(read_squad_examples(str(path), True), SentencePieceTokenizer(spm_model),
                                            max_seq_length=SEQ, doc_stride=64, max_query_length=32, is_training=True)
    arrays = features_to_arrays(features)
    if version == "v2":
        assert arrays["is_impossible"].any() and not arrays["is_impossible"].all()

    config = _tiny_config(tmp_path)

    def make(buckets):
        return SquadTask(SquadOptions(version=version, output_dir=str(tmp_path), albert_config_file=config,
                                      spm_model_file=spm_model, max_seq_length=SEQ, dropout_prob=0.0,
                                      length_buckets=buckets), arrays)

    def batches(task):
        columns = _feature_columns(task.train_arrays, with_labels=True)
        columns[EXAMPLE_INDEX] = np.arange(len(columns["input_word_ids"]), dtype=np.int32)
        return bucketed_batches(columns, columns["input_mask"].sum(1), BATCH, task.widths,
                                cut_to_width(SEQUENCE_INPUTS, task.widths), training=False)

    task = make("64,80,96,112")
    return task, _pairs(batches(make("none")), batches(task))


def test_squad_v2_loss_is_the_same_with_buckets(spm_model, tmp_path):
    """v2: p_mask (padding included) takes padding out of every softmax: the same loss."""
    task, pairs = _squad(spm_model, tmp_path, "v2")
    model = _model(task)
    _check_setup(task, model, pairs[0][0])
    for k, (full, cut, width) in enumerate(pairs):
        _assert_same_loss(_loss(task, model, full), _loss(task, model, cut), f"batch {k}, width {width}")


def test_squad_v1_loss_with_buckets_leaves_the_padding_past_the_width_out(spm_model, tmp_path):
    """v1 (documented in --length_buckets' help and docs/fine_tuning.md): the bucketed loss is the
    release's loss over the first W positions of the full batch's logits, and smaller than
    the full-padding loss whenever W < T. (Predictions are not affected, padding never
    holds an answer: tests/test_buckets.py.)"""
    from albert_tf.modeling.encoder import INPUT_NAMES
    from albert_tf.modeling.qa_heads import squad_v1_loss

    task, pairs = _squad(spm_model, tmp_path, "v1")
    model = _model(task)
    _check_setup(task, model, pairs[0][0])
    narrower = 0
    for k, (full, cut, width) in enumerate(pairs):
        where = f"batch {k}, width {width}"
        loss_full, _ = _loss(task, model, full)
        loss_cut, terms_cut = _loss(task, model, cut)
        out = model({name: full[name] for name in INPUT_NAMES}, training=True)
        rows = squad_v1_loss(out["start_logits"][:, :width], out["end_logits"][:, :width], full["start_positions"],
                             full["end_positions"], per_example=True)
        expected = float(tf.reduce_mean(rows))
        np.testing.assert_allclose(loss_cut, expected, rtol=RTOL, atol=ATOL, err_msg=where)
        np.testing.assert_allclose(terms_cut["loss_sum"], float(tf.reduce_sum(rows)), rtol=RTOL, atol=ATOL,
                                   err_msg=where)
        if width < SEQ:
            narrower += 1
            assert loss_cut < loss_full - 1e-3, where  # T - W padding logits fewer in the softmax
        else:
            np.testing.assert_allclose(loss_cut, loss_full, rtol=RTOL, atol=ATOL, err_msg=where)
    assert narrower


# --- RACE / multiple choice -------------------------------------------------------------------


@pytest.fixture(scope="module")
def race_case(spm_model, tmp_path_factory):
    """(task with buckets 64,128,192, [(full batch, cut batch, width)]) of generated RACE
    training questions at max_seq_length 256: the training finalize on a one-pass, by-length
    stream, the same examples per batch. Both skip_padding cases below read them."""
    from albert_tf.tasks.race.features import MultipleChoiceSettings, examples_to_arrays
    from albert_tf.tasks.race.reading import read_race
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.tasks.race.task import MultipleChoiceOptions, MultipleChoiceTask

    tmp_path = tmp_path_factory.mktemp("race")
    make_race_data.make_race(tmp_path / "data", num_articles=3, seed=2, layout="files")
    examples = read_race(str(tmp_path / "data"), "train")
    seq = 256
    arrays = examples_to_arrays(examples, SentencePieceTokenizer(spm_model),
                                MultipleChoiceSettings(max_seq_length=seq, max_qa_length=32))
    config = _tiny_config(tmp_path, max_position_embeddings=seq)

    def make(buckets):
        o = MultipleChoiceOptions(data_dir=str(tmp_path / "data"), output_dir=str(tmp_path),
                                  albert_config_file=config, spm_model_file=spm_model,
                                  max_seq_length=seq, max_qa_length=32, dropout_prob=0.0,
                                  length_buckets=buckets)
        return MultipleChoiceTask(o, {"train": examples}, {"train": arrays})

    task = make("64,128,192")
    return task, _pairs(make("none")._batches("train", BATCH, False), task._batches("train", BATCH, False), seq)


@pytest.mark.parametrize("skip_padding", [None, False], ids=["driver_default", "padding_computed"])
def test_multiple_choice_loss_is_the_same_with_buckets(race_case, skip_padding):
    """The loss reads the pooled [CLS] output of each option only: the same loss, with the
    driver's default (padding skipped in the encoder) and with padding computed (XLA, TPU).
    At max_seq_length 256 (RACE articles fill 128) for batches of several widths."""
    task, pairs = race_case
    model = _model(task, skip_padding)
    # the options share their article: a random encoder gives them nearly the same pooled
    # output, and the loss stays near log(4) whatever it does unless the head magnifies the
    # differences
    model.head.output_weights.assign(model.head.output_weights * 20.0)
    _check_setup(task, model, pairs[0][0])
    for k, (full, cut, width) in enumerate(pairs):
        _assert_same_loss(_loss(task, model, full), _loss(task, model, cut), f"batch {k}, width {width}")


# --- classification ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def classification_case(spm_model, tmp_path_factory):
    """(task with buckets 16,32,64, [(full batch, cut batch, width)]): the same batches of 64
    training examples (Task.batches_dataset: the training packing, each batch at its bucket),
    neighbours by length. Both skip_padding cases below read them."""
    from albert_tf.tasks.classification.data import get_task, read_examples
    from albert_tf.tasks.classification.task import ClassificationOptions, ClassificationTask

    task_def = get_task("tsv", labels=["concurrency", "networking", "numbers", "text"], text_a_column="sentence")
    splits = {"train": read_examples(task_def, TOPICS, "train")[:64]}
    config = _tiny_config(tmp_path_factory.mktemp("classification"))

    def make(buckets):
        o = ClassificationOptions(task_name="tsv", data_dir=TOPICS, output_dir="unused", spm_model_file=spm_model,
                                  albert_config_file=config, max_seq_length=SEQ, classifier_dropout=0.0,
                                  length_buckets=buckets)
        return ClassificationTask(o, task_def, splits)

    task, task_full = make("16,32,64"), make("none")
    for each in (task, task_full):
        each.build_model()  # its preprocessing
    order = task._lengths("train").argsort(kind="stable")  # neighbours by length: narrow batches
    batches = [order[i:i + BATCH].tolist() for i in range(0, len(order), BATCH)]
    return task, _pairs(task_full.batches_dataset(batches), task.batches_dataset(batches))


@pytest.mark.parametrize("skip_padding", [None, False], ids=["driver_default", "padding_computed"])
def test_classification_loss_is_the_same_with_buckets(classification_case, skip_padding):
    """The loss reads the pooled [CLS] output: the same loss on the same batches of training
    examples (Task.batches_dataset: the training packing, each batch at its bucket)."""
    task, pairs = classification_case
    model = _model(task, skip_padding)
    _check_setup(task, model, pairs[0][0])
    for k, (full, cut, width) in enumerate(pairs):
        _assert_same_loss(_loss(task, model, full), _loss(task, model, cut), f"batch {k}, width {width}")


def test_the_flag_help_says_what_differs():
    """--length_buckets' help on every command: the batches differ; SQuAD v1 also says its
    training loss differs, the others that theirs does not."""
    from absl import flags

    from albert_tf import run_classifier, run_race, run_squad_v1, run_squad_v2

    for module, v1 in ((run_squad_v1, True), (run_squad_v2, False), (run_race, False), (run_classifier, False)):
        fv = flags.FlagValues()
        module.define_flags(fv)
        text = fv["length_buckets"].help
        assert "a training run sees other batches than with `none`" in text, module.__name__
        assert ("the v1 head's training loss is not" in text) == v1, module.__name__
        assert ("the outputs and the training loss are the same" in text) != v1, module.__name__
