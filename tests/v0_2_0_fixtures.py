"""Writes tests/data/v0_2_0/fixtures.tar.xz: small outputs of albert_tf 0.2.0, for
tests/test_v0_2_0_outputs.py.

Run against commit 614fe3f (0.2.0) checked out in a worktree, on CPython 3.11.7, so that the
old albert_tf is the one imported:

    git worktree add --detach /work/wt-v020 614fe3f
    cd /work/wt-v020 && PYTHONPATH=/work/wt-v020 TF_NUM_INTRAOP_THREADS=1 \\
        .venv/bin/python /work/wt-compat/tests/v0_2_0_fixtures.py \\
        --corpus=/work/wt-compat/albert_tf/data/sample_corpus.jsonl.gz --output_dir=/tmp/v0_2_0 \\
        --archive=/work/wt-compat/tests/data/v0_2_0/fixtures.tar.xz

(The archive was written by this file when it was tests/data/v0_2_0/make_fixtures.py.)
It writes the outputs into --output_dir (a new directory), then packs them as v0_2_0/... into
--archive (xz: a pretraining checkpoint holds the input pipeline's state, a 10,000-example
shuffle buffer of the same 67 serialized examples, 5.6 MB that xz packs into little). Every
output is made by 0.2.0's own commands, called in-process through their `main(argv)`, at
--dtype_policy=float32:

- data/: a 1000-piece SentencePiece model (tools/train_sentencepiece.py) of the first 100 kB
  of the sample corpus (albert_tf/data/sample_corpus.jsonl.gz: the file is read as data here,
  0.2.0 had no such file; its .vocab removed), and create_pretraining_data's TFRecords of the
  first 12 kB (67 instances, seq 64) with their summary;
- pretraining_run/: run_pretraining of albert_tiny (vocab 1000, no dropout), 4 steps,
  checkpoints at 2 and 4, with an evaluation (TensorBoard's events and training_curves.png
  removed: nothing reads them);
- pretrained/: `AlbertPretrainer.save_pretrained` of the run's final weights;
- converted/: pretrained/ converted to a TF1 release checkpoint and that back to albert_tf
  (`python -m albert_tf.convert`, both ways; the TF1 checkpoint is not kept);
- export/: export_tfhub of the run (encoder/ and preprocess/, seq 32);
- classifier_data/ and classifier_run/: run_classifier (CoLA layout, from pretrained/), 4 steps
  with dev evaluation (events and curves removed);
- outputs.npz: what 0.2.0 computed on fixed inputs: `pretrained_*` (from_pretrained's encoder
  and heads), `converted_*`, `export_*` (the export's preprocessing of fixed sentences and
  its encoder's outputs).
"""

import argparse
import contextlib
import gzip
import importlib
import io
import json
import os
import shutil
import sys

import numpy as np

SENTENCES = ["The module reads the configuration file and returns a dictionary.",
             "Each worker opens its own connection to the server."]
CORPUS_BYTES = 100_000  # for the SentencePiece model
DATA_BYTES = 12_000  # for the TFRecords (a checkpoint holds the input's shuffle buffer: kept small)


def pretraining_args(records, run, config_file, *extra):
    """run_pretraining's arguments (tests/test_v0_2_0_outputs.py continues the run with them)."""
    return [f"--input_file={records}", f"--output_dir={run}", f"--albert_config_file={config_file}",
            "--max_seq_length=64", "--max_predictions_per_seq=10", "--train_batch_size=8", "--eval_batch_size=8",
            "--learning_rate=0.005", "--num_warmup_steps=2", "--save_checkpoints_steps=2", "--iterations_per_loop=2",
            "--max_eval_steps=2", "--random_seed=12345", "--dtype_policy=float32", *extra]


def classifier_args(data_dir, run, pretrained, spm, *extra):
    """run_classifier's arguments (tests/test_v0_2_0_outputs.py evaluates the run with them)."""
    return ["--task_name=cola", f"--data_dir={data_dir}", f"--output_dir={run}", f"--init_checkpoint={pretrained}",
            f"--spm_model_file={spm}", "--max_seq_length=32", "--train_batch_size=8", "--eval_batch_size=8",
            "--train_step=4", "--save_checkpoints_steps=2", "--iterations_per_loop=2", "--keep_checkpoint_max=1",
            "--learning_rate=1e-3", "--random_seed=12345", "--dtype_policy=float32", *extra]


def call(main, args):
    """main(args) with its output captured; exits with its output when it fails."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in args])
    if status:
        sys.exit(f"{main.__module__} {args}: exit {status}\n{out.getvalue()[-3000:]}\n{err.getvalue()[-3000:]}")
    return out.getvalue()


def write_corpus(jsonl_gz, path, size):
    """The sample corpus' first documents (about `size` bytes), one sentence a line, a blank
    line between documents."""
    written = 0
    with gzip.open(jsonl_gz, "rt", encoding="utf-8") as f, open(path, "w", encoding="utf-8") as out:
        for line in f:
            sentences = json.loads(line)["sentences"]
            if len(sentences) < 2:
                continue
            block = "".join(s + "\n" for s in sentences) + "\n"
            out.write(block)
            written += len(block.encode("utf-8"))
            if written >= size:
                break


def encoder_inputs(vocab_size):
    rng = np.random.default_rng(20)
    ids = rng.integers(5, vocab_size, (3, 16)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 10:], mask[2, 5:] = 0, 0
    ids *= mask
    types = np.zeros_like(ids)
    types[:, 8:] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types * mask,
            "masked_lm_positions": np.array([[1, 2, 3], [0, 4, 9], [1, 2, 4]], "int32")}


def model_outputs(model, x, prefix):
    out = model(x, training=False)
    encoder = model.encoder(x, training=False)
    return {f"{prefix}_sequence_output": np.asarray(encoder["sequence_output"]),
            f"{prefix}_pooled_output": np.asarray(encoder["pooled_output"]),
            f"{prefix}_mlm_logits": np.asarray(out["mlm_logits"]),
            f"{prefix}_sop_logits": np.asarray(out["sop_logits"])}


def drop_reports(run):
    """TensorBoard's events and the PNG curves: nothing of the tests reads them."""
    for name in ("train", "eval"):
        shutil.rmtree(os.path.join(run, name), ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(run, "training_curves.png"))


def pack(directory, archive):
    """directory's files as v0_2_0/<relative path>, sorted, without owners or times."""

    def plain(info):
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    import tarfile

    with tarfile.open(archive, "w:xz", preset=9) as tar:
        for parent, dirs, files in os.walk(directory):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(parent, name)
                tar.add(path, arcname=os.path.join("v0_2_0", os.path.relpath(path, directory)), filter=plain)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", required=True, help="albert_tf/data/sample_corpus.jsonl.gz")
    parser.add_argument("--output_dir", required=True, help="a new directory")
    parser.add_argument("--archive", required=True, help="the .tar.xz to write")
    a = parser.parse_args()
    import albert_tf

    root = os.path.dirname(os.path.dirname(os.path.abspath(albert_tf.__file__)))
    print("albert_tf from", albert_tf.__file__, file=sys.stderr)
    out = os.path.abspath(a.output_dir)
    os.makedirs(out)
    scratch = os.path.join(out, "scratch")
    data = os.path.join(out, "data")
    os.makedirs(scratch)
    os.makedirs(data)
    corpus, text = os.path.join(scratch, "corpus.txt"), os.path.join(scratch, "text.txt")
    write_corpus(a.corpus, corpus, CORPUS_BYTES)
    write_corpus(a.corpus, text, DATA_BYTES)

    # 0.2.0's tools/ (no package there: a namespace package from the worktree on PYTHONPATH)
    tool = importlib.import_module("tools.train_sentencepiece")
    assert os.path.dirname(os.path.abspath(tool.__file__)) == os.path.join(root, "tools"), tool.__file__
    call(tool.main, [f"--input_file={corpus}", f"--model_prefix={data}/spm", "--vocab_size=1000",
                     "--num_threads=1"])
    spm = os.path.join(data, "spm.model")
    for name in os.listdir(data):  # the .vocab (and its marker): nothing reads it
        if name.endswith(".vocab") or name.endswith(".vocab.albert_tf_output.json"):
            os.remove(os.path.join(data, name))

    from albert_tf import create_pretraining_data, export_tfhub, run_classifier, run_pretraining

    records = os.path.join(data, "train.tfrecord")
    call(create_pretraining_data.main, [f"--input_file={text}", f"--output_file={records}",
                                        f"--spm_model_file={spm}", "--max_seq_length=64",
                                        "--max_predictions_per_seq=10", "--dupe_factor=1", "--num_workers=1"])

    with open(os.path.join(root, "configs", "albert_tiny.json"), encoding="utf-8") as f:
        config = json.load(f)
    config.update(vocab_size=1000, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config_file = os.path.join(scratch, "albert_config.json")
    with open(config_file, "w", encoding="utf-8") as f:
        json.dump(config, f)

    run = os.path.join(out, "pretraining_run")
    call(run_pretraining.main, pretraining_args(records, run, config_file, "--num_train_steps=4"))
    drop_reports(run)

    from albert_tf import AlbertConfig, AlbertPretrainer
    import tensorflow as tf

    cfg = AlbertConfig.from_json_file(config_file)
    trained = AlbertPretrainer(cfg)
    tf.train.Checkpoint(model=trained).read(tf.train.latest_checkpoint(run)).expect_partial()
    pretrained = os.path.join(out, "pretrained")
    trained.save_pretrained(pretrained)
    x = encoder_inputs(cfg.vocab_size)
    arrays = {f"inputs_{k}": v for k, v in x.items()}
    arrays.update(model_outputs(AlbertPretrainer.from_pretrained(pretrained), x, "pretrained"))

    from albert_tf.convert import __main__ as convert

    tf1 = os.path.join(scratch, "tf1")
    call(convert.main, ["--from=albert_tf", "--to=tf1", f"--input={pretrained}", f"--output={tf1}"])
    prefix = tf.train.latest_checkpoint(tf1) or os.path.join(tf1, "model.ckpt")
    converted = os.path.join(out, "converted")
    call(convert.main, ["--from=tf1", "--to=albert_tf", f"--input={prefix}",
                        f"--albert_config_file={config_file}", f"--output={converted}"])
    arrays.update(model_outputs(AlbertPretrainer.from_pretrained(converted), x, "converted"))

    export = os.path.join(out, "export")
    call(export_tfhub.main, [f"--albert_config_file={config_file}", f"--checkpoint={run}",
                             f"--spm_model_file={spm}", f"--export_path={export}", "--seq_length=32"])
    import tensorflow_text  # noqa: F401  (the preprocessing model's ops)

    preprocess = tf.saved_model.load(os.path.join(export, "preprocess"))
    encoder = tf.saved_model.load(os.path.join(export, "encoder"))
    ids = preprocess(tf.constant(SENTENCES))
    encoded = encoder(ids, training=False)
    arrays["export_sentences"] = np.array(SENTENCES)
    arrays.update({f"export_{k}": v.numpy() for k, v in ids.items()})
    arrays.update({f"export_{k}": encoded[k].numpy() for k in ("sequence_output", "pooled_output")})

    classifier_data = os.path.join(out, "classifier_data")
    os.makedirs(classifier_data)
    with open(os.path.join(root, "notebooks", "data", "docstring_topics", "train.tsv"), encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    lines = [f"src\t{int(label == 'networking')}\t\t{text}\n" for text, label in rows[:32]]
    for split, chosen in (("train", lines), ("dev", lines[:16])):
        with open(os.path.join(classifier_data, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("".join(chosen))
    classifier_run = os.path.join(out, "classifier_run")
    call(run_classifier.main, classifier_args(classifier_data, classifier_run, pretrained, spm, "--do_train",
                                              "--do_eval"))
    drop_reports(classifier_run)

    np.savez(os.path.join(out, "outputs.npz"), **arrays)
    shutil.rmtree(scratch)
    pack(out, a.archive)
    print("wrote", out, "and", a.archive)


if __name__ == "__main__":
    main()
