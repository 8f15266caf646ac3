"""Length bucketing (albert_tf.data.buckets): the widths, and for the classification, SQuAD
and RACE pipelines the same outputs, in the same order, with bucketing as with full padding
(logits <= 1e-5, metrics identical), while the batches really are narrower. Classification
and RACE also skip padding in the encoder (the driver's default for them): compared with the
release's way (full padding, all computed) too."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.bucket_widths import bucket_widths
from albert_tf.data.buckets import bucketed_batches, cut_to_width
from albert_tf.training.driver import Trainer, TrainingOptions
from tools import make_race_data, make_squad_data

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SEQ = 128
TOPICS = os.path.join(ROOT, "notebooks", "data", "docstring_topics")


def test_bucket_widths():
    assert bucket_widths(128) == (16, 32, 64, 128)
    assert bucket_widths(384, "64, 128,256,384,512") == (64, 128, 256, 384)
    assert bucket_widths(100, [16, 32]) == (16, 32, 100)
    assert bucket_widths(128, "none") == bucket_widths(128, "") == bucket_widths(128, None) == (128,)
    for bad in ("16,x", "0", "-4"):
        with pytest.raises(ValueError, match="--length_buckets"):
            bucket_widths(128, bad)


def test_training_batches_are_shuffled_across_buckets_and_each_is_one_width():
    lengths = np.array([5, 40, 20, 100, 12, 30, 60, 3] * 8)
    columns = {"x": np.tile(np.arange(128), (len(lengths), 1)), "i": np.arange(len(lengths))}
    widths = bucket_widths(128, "16,32,64")
    ds = bucketed_batches(columns, lengths, 4, widths, cut_to_width(("x",), widths), training=True, seed=3)
    seen_widths, seen = [], set()
    for batch in ds.take(40):
        width = batch["x"].shape[1]
        assert width in widths and all(lengths[i] <= width for i in batch["i"].numpy())
        assert width == min(w for w in widths if w >= lengths[batch["i"].numpy()].max())
        seen_widths.append(width)
        seen.update(batch["i"].numpy().tolist())
    assert set(seen_widths) == set(widths) and len(seen) == len(lengths)
    assert len(set(seen_widths[:8])) > 1  # buckets interleave, not one bucket after another
    # evaluation: one pass by length; every example once
    ds = bucketed_batches(columns, lengths, 4, widths, cut_to_width(("x",), widths), training=False)
    order = np.concatenate([b["i"].numpy() for b in ds])
    assert sorted(order.tolist()) == list(range(len(lengths)))
    assert np.all(np.diff(lengths[order]) >= 0)


def _outputs(task_factory, buckets, weights=None, dataset=lambda task, batch: task.eval_dataset(batch),
             skip_padding=None):
    """skip_padding None: the driver's choice for the task; False: padding computed (the release)."""
    task = task_factory(buckets)
    trainer = Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=8, eval_batch_size=8))
    if skip_padding is not None:
        assert trainer.model.configure_runtime(skip_padding=skip_padding)
    else:
        assert trainer.skips_padding == task.skip_padding
    if weights is not None:
        trainer.model.set_weights(weights)
    widths = {int(b["input_word_ids"].shape[-1]) for b in dataset(task, 8)}
    outputs = trainer.per_example_outputs(dataset(task, 8), 8)
    # one trace of the evaluation step whatever the number of widths (one each cost seconds)
    assert trainer._eval_fn.experimental_get_tracing_count() == 1, widths
    return outputs, trainer.model.get_weights(), task, widths


def _compare(first, second, float_keys, real=None):
    """Equal outputs; `real` [N, T] limits per-position outputs to the real positions (past
    them one run has the model's values for padding, the other the padding logit)."""
    for key in float_keys:
        a, b = first[key], second[key]
        if real is not None and a.ndim == 2 and a.shape == real.shape:
            a, b = np.where(real, a, 0.0), np.where(real, b, 0.0)
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0, err_msg=key)
    np.testing.assert_array_equal(first["example_index"], second["example_index"])


def test_classification_same_logits_and_metrics(tiny_export):
    from albert_tf.tasks.classification.data import get_task, read_examples
    from albert_tf.tasks.classification.task import ClassificationOptions, ClassificationTask

    task_def = get_task("tsv", labels=["concurrency", "networking", "numbers", "text"], text_a_column="sentence")
    splits = {"dev": read_examples(task_def, TOPICS, "dev")[:96]}

    def make(buckets):
        o = ClassificationOptions(task_name="tsv", data_dir=TOPICS, output_dir="unused",
                                  init_checkpoint=tiny_export["pretrained"], spm_model_file=tiny_export["spm"],
                                  albert_config_file=os.path.join(tiny_export["pretrained"], "albert_config.json"),
                                  max_seq_length=SEQ, length_buckets=buckets)
        return ClassificationTask(o, task_def, splits)

    # the release (full padding, computed) against buckets + skipped padding (the default), and each alone
    full, weights, task, full_widths = _outputs(make, "none", skip_padding=False)
    bucketed, _, task_b, widths = _outputs(make, "16,32,64", weights)
    assert full_widths == {SEQ} and len(widths) > 1 and min(widths) < SEQ  # real sentences: mostly short
    _compare(full, bucketed, ["logits", "nll"])
    assert task.eval_metrics(full)["accuracy"] == task_b.eval_metrics(bucketed)["accuracy"]
    for buckets, skip in (("16,32,64", False), ("none", True)):
        alone = _outputs(make, buckets, weights, skip_padding=skip)[0]
        _compare(full, alone, ["logits", "nll"])
    # XLA needs static shapes: a jit-compiled run keeps the padding
    xla = Trainer(make("none"), TrainingOptions(output_dir="unused", train_batch_size=8, eval_batch_size=8,
                                                jit_compile=True))
    assert not xla.skips_padding and not xla.model.runtime.skip_padding


def test_classification_batches_dataset_keeps_the_given_batches(tiny_export):
    """Task.batches_dataset: the given batches of indices, in order, each at its bucket's width
    (what benchmarks/finetune_bench.py's accuracy run gives every system)."""
    from albert_tf.tasks.classification.data import get_task, read_examples
    from albert_tf.tasks.classification.task import ClassificationOptions, ClassificationTask

    task_def = get_task("tsv", labels=["concurrency", "networking", "numbers", "text"], text_a_column="sentence")
    o = ClassificationOptions(task_name="tsv", data_dir=TOPICS, output_dir="unused",
                              init_checkpoint=tiny_export["pretrained"], spm_model_file=tiny_export["spm"],
                              albert_config_file=os.path.join(tiny_export["pretrained"], "albert_config.json"),
                              max_seq_length=SEQ, length_buckets="16,32,64")
    task = ClassificationTask(o, task_def, {"train": read_examples(task_def, TOPICS, "train")[:64]})
    Trainer(task, TrainingOptions(output_dir="unused", train_batch_size=8))  # builds the preprocessing
    batches = [np.random.default_rng(k).permutation(64)[:8].tolist() for k in range(5)]
    lengths = task._lengths("train")
    got = list(task.batches_dataset(batches))
    assert [b["example_index"].numpy().tolist() for b in got] == batches
    for batch, indices in zip(got, batches):
        assert batch["input_word_ids"].shape[1] == min(w for w in (16, 32, 64, SEQ) if w >= lengths[indices].max())
    with pytest.raises(ValueError, match="one size"):
        task.batches_dataset([[0, 1], [2]])
    with pytest.raises(ValueError, match="outside train's 64 examples"):
        task.batches_dataset([[0, 64]])


def test_classification_datasets_pack_the_ids_the_raw_text_path_gives(tiny_export):
    """The task tokenizes each split once and its datasets pack those pieces: every example's
    inputs (pairs, texts longer than max_seq_length, empty second texts; with and without
    buckets, training and evaluation) equal what `pack` gives from the raw strings (the raw
    text path of the exported classifier)."""
    from albert_tf.tasks.classification.data import Example, get_task, read_examples
    from albert_tf.tasks.classification.pipeline import pack
    from albert_tf.tasks.classification.task import ClassificationOptions, ClassificationTask

    seq = 32
    topics = get_task("tsv", labels=["concurrency", "networking", "numbers", "text"], text_a_column="sentence")
    sentences = [e.text_a for e in read_examples(topics, TOPICS, "dev")[:40]]
    examples = [Example(guid=f"dev-{i}", text_a=s if i % 5 else " ".join(sentences[i:i + 6]),  # some past seq
                        text_b=None if i % 7 == 3 else sentences[-i - 1] if i % 3 else "", label=["no", "yes"][i % 2])
                for i, s in enumerate(sentences)]
    task_def = get_task("tsv", labels=["no", "yes"], text_a_column="sentence", text_b_column="other")
    inputs = ("input_word_ids", "input_mask", "input_type_ids")
    for buckets in ("none", "8,16"):
        o = ClassificationOptions(task_name="tsv", data_dir=TOPICS, output_dir="unused",
                                  init_checkpoint=tiny_export["pretrained"], spm_model_file=tiny_export["spm"],
                                  albert_config_file=os.path.join(tiny_export["pretrained"], "albert_config.json"),
                                  max_seq_length=seq, length_buckets=buckets)
        task = ClassificationTask(o, task_def, {"train": examples, "dev": examples})
        task.build_model()
        expected = pack(task.preprocess, tf.constant([e.text_a for e in examples]),
                        tf.constant([e.text_b or "" for e in examples]), seq)
        expected = {k: v.numpy() for k, v in expected.items()}
        assert (expected["input_mask"].sum(1) == seq).sum() >= 5  # truncated pairs are in the comparison
        assert sorted(task._lengths("dev").tolist()) == sorted(expected["input_mask"].sum(1).tolist())
        seen = set()
        for batch in [*task.split_dataset("dev", 16), *task.train_dataset(None, 8, 0).take(10)]:
            width = batch["input_word_ids"].shape[1]
            assert buckets == "8,16" or width == seq
            for row, index in enumerate(batch["example_index"].numpy()):
                seen.add(int(index))
                for name in inputs:
                    got = batch[name].numpy()[row]
                    assert not expected[name][index][width:].any(), (buckets, index)  # only padding cut
                    np.testing.assert_array_equal(got, expected[name][index][:width], err_msg=f"{buckets} {index}")
        assert seen == set(range(len(examples)))


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_squad_same_outputs(spm_model, tmp_path, version):
    from albert_tf.tasks.squad.features import convert_examples_to_features, features_to_arrays
    from albert_tf.tasks.squad.reading import read_squad_examples
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.tasks.squad.task import SquadOptions, SquadTask

    tool = make_squad_data
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(tool.make_dataset("2.0" if version == "v2" else "1.1", 24, seed=4,
                                                 max_context_chars=600)), encoding="utf-8")
    tokenizer = SentencePieceTokenizer(spm_model)
    features = convert_examples_to_features(read_squad_examples(str(path), False), tokenizer, max_seq_length=SEQ,
                                            doc_stride=64, max_query_length=32, is_training=False)
    config = os.path.join(ROOT, "configs", "albert_tiny.json")
    config_path = tmp_path / "config.json"
    cfg = json.load(open(config))
    cfg.update(vocab_size=3000)
    config_path.write_text(json.dumps(cfg))

    def make(buckets):
        return SquadTask(SquadOptions(version=version, output_dir=str(tmp_path), albert_config_file=str(config_path),
                                      spm_model_file=spm_model, max_seq_length=SEQ, start_n_top=3, end_n_top=3,
                                      length_buckets=buckets))

    def dataset(task, batch):
        return task.predict_dataset(features, batch)

    full, weights, _, full_widths = _outputs(make, "none", dataset=dataset)
    bucketed, _, _, widths = _outputs(make, "32,64,96", weights, dataset=dataset)
    assert full_widths == {SEQ} and len(widths) > 1
    if version == "v1":
        real = features_to_arrays(features)["input_mask"] > 0
        _compare(full, bucketed, ["start_logits", "end_logits"], real)
    else:
        _compare(full, bucketed, ["start_top_log_probs", "end_top_log_probs", "cls_logits"])
        for key in ("start_top_index", "end_top_index"):
            np.testing.assert_array_equal(full[key], bucketed[key])


def test_race_same_probabilities_and_accuracy(spm_model, tmp_path):
    from albert_tf.tasks.race.features import MultipleChoiceSettings, examples_to_arrays
    from albert_tf.tasks.race.reading import read_race
    from albert_tf.data.tokenization import SentencePieceTokenizer
    from albert_tf.tasks.race.task import MultipleChoiceOptions, MultipleChoiceTask

    make_race_data.make_race(tmp_path / "data", num_articles=4, seed=2, layout="files")
    examples = read_race(str(tmp_path / "data"), "dev")
    arrays = examples_to_arrays(examples, SentencePieceTokenizer(spm_model),
                                MultipleChoiceSettings(max_seq_length=SEQ, max_qa_length=32))
    cfg = json.load(open(os.path.join(ROOT, "configs", "albert_tiny.json")))
    cfg.update(vocab_size=3000)
    (tmp_path / "config.json").write_text(json.dumps(cfg))

    def make(buckets):
        o = MultipleChoiceOptions(data_dir=str(tmp_path / "data"), output_dir=str(tmp_path),
                                  albert_config_file=str(tmp_path / "config.json"), spm_model_file=spm_model,
                                  max_seq_length=SEQ, max_qa_length=32, length_buckets=buckets)
        return MultipleChoiceTask(o, {"dev": examples}, {"dev": arrays})

    full, weights, task, full_widths = _outputs(make, "none", skip_padding=False)
    bucketed, _, task_b, widths = _outputs(make, "16,32,64,96", weights)  # and padding skipped
    assert full_widths == {SEQ} and max(widths) <= SEQ and len(widths) >= 1
    _compare(full, bucketed, ["probabilities", "nll"])
    assert task.eval_metrics(full) == pytest.approx(task_b.eval_metrics(bucketed))
    tf.keras.backend.clear_session()
