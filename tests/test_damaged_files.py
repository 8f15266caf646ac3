"""Damaged files, made for real in each test (a file cut short, bytes changed, a data shard or
the index removed): a resumed run sets a damaged checkpoint aside and continues from the newest
one that restores, or exits 2 naming each when none does; --init_checkpoint, the exports and
convert exit 2 naming a damaged checkpoint or weights file (`.weights.h5` carries a sha256
albert_tf checks; 0.2.0's files have none and load: tests/test_v0_2_0_outputs.py); a TFRecord
input cut short exits 2 naming it (on gs://: by the size its marker recorded); a damaged feature
cache is rebuilt. In this process (the commands' main), but for gs:// (the emulator's process of
its own)."""

import glob
import json
import os
import shutil
import struct

import h5py
import numpy as np
import pytest
from conftest import flip_a_bit, run_in_process, write_tiny_config
from test_run_pretraining import _finished, _two_workers, model_values
from test_run_pretraining import pretrain_args as run_pretraining_args

from albert_tf import export_tfhub, run_pretraining
from albert_tf.storage.integrity import DIGEST_ATTRIBUTE


@pytest.fixture(scope="module")
def tiny_config_file(tmp_path_factory):
    return write_tiny_config(tmp_path_factory.mktemp("config"), num_hidden_layers=1, num_hidden_groups=1)


def pretrain_args(records, output_dir, config, *extra):
    """test_run_pretraining's arguments, checkpoints every 2 steps, no evaluation."""
    return run_pretraining_args(records, output_dir, config, "--nodo_eval", "--save_checkpoints_steps=2",
                                "--iterations_per_loop=2", "--num_warmup_steps=1", *extra)


@pytest.fixture(scope="module")
def run_4(pretraining_records, tiny_config_file, tmp_path_factory):
    """A 4-step pretraining run (ckpt-2, ckpt-4, pretrainer.weights.h5); tests damage copies."""
    records, _ = pretraining_records
    run = tmp_path_factory.mktemp("run_4") / "run"
    result = run_in_process(run_pretraining, pretrain_args(records, run, tiny_config_file, "--num_train_steps=4"))
    assert result.returncode == 0, result.stderr[-3000:]
    return run


def copy_run(run_4, tmp_path):
    return shutil.copytree(run_4, tmp_path / "run")


def cut_short(path, keep=0.5):
    with open(path, "r+b") as f:
        f.truncate(int(os.path.getsize(path) * keep))


def data_file(prefix):
    (path,) = glob.glob(f"{prefix}.data-*")
    return path


DAMAGE = {
    "data_cut_short": (lambda prefix: cut_short(data_file(prefix)), "cut short"),
    "data_bytes_changed": (lambda prefix: flip_a_bit(type(prefix)(data_file(prefix))), "checksum"),
    "index_missing": (lambda prefix: os.remove(f"{prefix}.index"), "index file ckpt-4.index is missing"),
    "data_shard_missing": (lambda prefix: os.remove(data_file(prefix)), "its data file (ckpt-4.data-*) is missing"),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_resume_sets_a_damaged_newest_checkpoint_aside_and_continues_from_the_one_before(
        pretraining_records, tiny_config_file, run_4, tmp_path, kind):
    records, _ = pretraining_records
    run = copy_run(run_4, tmp_path)
    damage, what = DAMAGE[kind]
    damage(run / "ckpt-4")
    result = run_in_process(run_pretraining, pretrain_args(records, run, tiny_config_file, "--num_train_steps=6"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"damaged checkpoint {run / 'ckpt-4'}: " in result.stdout and what in result.stdout, result.stdout
    assert f"resuming from {run / 'ckpt-2'} at step 2" in result.stdout
    (aside,) = glob.glob(str(run / "ckpt-4.damaged-*"))  # kept, renamed aside
    assert f"set aside as {aside}" in result.stdout
    assert os.listdir(aside)  # its files, never deleted
    assert sorted(p.name for p in run.glob("ckpt-*.index")) == ["ckpt-2.index", "ckpt-4.index", "ckpt-6.index"]
    assert "ckpt-4.damaged" not in (run / "checkpoint").read_text()
    assert "WARNING" not in result.stderr, result.stderr  # nor TensorFlow's of the failed restore
    if kind == "data_cut_short":  # the set-aside checkpoint is not picked up again
        again = run_in_process(run_pretraining, pretrain_args(records, run, tiny_config_file, "--num_train_steps=8"))
        assert again.returncode == 0 and "damaged checkpoint" not in again.stdout, again.stdout + again.stderr
        assert f"resuming from {run / 'ckpt-6'} at step 6" in again.stdout


@pytest.mark.real_process
def test_two_workers_resume_past_a_damaged_checkpoint_from_the_same_one_and_the_chief_alone_sets_it_aside(
        pretraining_records, tiny_config_file, tmp_path):
    """MultiWorkerMirroredStrategy, two processes on loopback sharing --output_dir: both skip the
    damaged newest checkpoint and restore the one before; the chief sets it aside once both have
    chosen (no worker reads while it moves); the run ends with the weights of the undamaged run
    (a resume is exact: test_run_pretraining's multi-worker test)."""
    records, _ = pretraining_records
    run = tmp_path / "run"
    flags = ("--nodo_eval", "--save_checkpoints_steps=2", "--iterations_per_loop=2", "--num_warmup_steps=1",
             "--num_train_steps=4", "--deterministic", "--dynamic_masking", "--dtype_policy=float32")
    for code, _, stderr in _finished(_two_workers(records, tiny_config_file, [run, run], *flags)[0]):
        assert code == 0, stderr[-3000:]
    whole = model_values(str(run / "ckpt-4"))
    cut_short(data_file(run / "ckpt-4"))
    (chief, chief_out, chief_err), (worker, worker_out, worker_err) = _finished(
        _two_workers(records, tiny_config_file, [run, run], *flags)[0])
    assert chief == 0 and worker == 0, chief_err[-3000:] + worker_err[-3000:]
    (aside,) = glob.glob(str(run / "ckpt-4.damaged-*"))  # once, by the chief
    assert f"damaged checkpoint {run / 'ckpt-4'}: its data is cut short; set aside as {aside}" in chief_out
    assert f"damaged checkpoint {run / 'ckpt-4'}: its data is cut short; the chief sets it aside" in worker_out
    for out in (chief_out, worker_out):
        assert f"resuming from {run / 'ckpt-2'} at step 2" in out, out
    resumed = model_values(str(run / "ckpt-4"))
    assert resumed.keys() == whole.keys() and whole
    for name in whole:
        np.testing.assert_array_equal(resumed[name], whole[name], err_msg=name)


def test_resume_when_no_checkpoint_restores_exits_2_naming_each(pretraining_records, tiny_config_file, run_4,
                                                                tmp_path):
    records, _ = pretraining_records
    run = copy_run(run_4, tmp_path)
    cut_short(data_file(run / "ckpt-4"))
    flip_a_bit(type(run)(data_file(run / "ckpt-2")))
    before = sorted(os.listdir(run))
    result = run_in_process(run_pretraining, pretrain_args(records, run, tiny_config_file, "--num_train_steps=6"))
    assert result.returncode == 2, result.stderr[-3000:]
    assert "no checkpoint restores" in result.stderr and "Traceback" not in result.stderr
    assert str(run / "ckpt-4") in result.stderr and str(run / "ckpt-2") in result.stderr
    assert "Read less bytes" not in result.stderr  # no library internal text
    assert sorted(os.listdir(run)) == before  # nothing set aside, nothing started from step 0


def test_init_checkpoint_and_export_from_a_damaged_checkpoint_exit_2_naming_it(
        pretraining_records, tiny_config_file, spm_model, run_4, tmp_path):
    records, _ = pretraining_records
    run = copy_run(run_4, tmp_path)
    cut_short(data_file(run / "ckpt-4"))
    fresh = tmp_path / "fresh"
    result = run_in_process(run_pretraining, pretrain_args(records, fresh, tiny_config_file, "--num_train_steps=2",
                                                           f"--init_checkpoint={run}"))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"the checkpoint {run / 'ckpt-4'} is damaged: " in result.stderr and "cut short" in result.stderr
    assert "Read less bytes" not in result.stderr
    assert not (fresh / "ckpt-2.index").exists()

    result = run_in_process(export_tfhub, [f"--albert_config_file={tiny_config_file}", f"--checkpoint={run}",
                                           f"--spm_model_file={spm_model}", f"--export_path={tmp_path / 'export'}"])
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"--checkpoint={run}: the checkpoint {run / 'ckpt-4'} is damaged" in result.stderr
    assert not (tmp_path / "export").exists()

    os.remove(run / "ckpt-4.index")  # the prefix, or the directory whose `checkpoint` file names it
    for checkpoint in (run / "ckpt-4", run):
        result = run_in_process(export_tfhub, [f"--albert_config_file={tiny_config_file}", f"--checkpoint={checkpoint}",
                                               f"--spm_model_file={spm_model}", f"--export_path={tmp_path / 'export'}"])
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
        assert f"{checkpoint}: the checkpoint {run / 'ckpt-4'} is damaged: its index file ckpt-4.index is missing" \
            in result.stderr  # not a silent read of ckpt-2


def test_a_weights_file_is_checked_against_its_sha256(run_4, tmp_path):
    from albert_tf import AlbertPretrainer
    from albert_tf.convert import __main__ as convert
    from albert_tf.storage import integrity

    directory = AlbertPretrainer.from_pretrained(run_4).save_pretrained(tmp_path / "pretrained")
    weights = os.path.join(directory, "pretrainer.weights.h5")
    with h5py.File(weights, "r") as f:
        assert len(f.attrs[DIGEST_ATTRIBUTE]) == 64  # written with it
    AlbertPretrainer.from_pretrained(directory)  # and it matches

    with h5py.File(weights, "r+") as f:  # bytes of one weight changed, the file still well formed
        names = []
        f.visititems(lambda n, obj: names.append(n) if isinstance(obj, h5py.Dataset) else None)
        f[names[0]][...] = np.asarray(f[names[0]]) + 1
    result = run_in_process(convert, ["--from=albert_tf", f"--input={directory}", "--to=tf1",
                                      f"--output={tmp_path / 'tf1'}"])
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"{weights}: damaged: its weights changed since albert_tf wrote it" in result.stderr
    assert not (tmp_path / "tf1").exists()

    cut_short(weights)
    with pytest.raises(ValueError, match="damaged: not a readable weights file"):
        AlbertPretrainer.from_pretrained(directory)

    unsealed = str(tmp_path / "unsealed.weights.h5")
    with h5py.File(unsealed, "w") as f:  # written by another program (or albert_tf 0.2.0): no sha256
        f.create_dataset("x", data=np.zeros(3))
    integrity.check_weights_file(unsealed, "")


def test_convert_of_a_damaged_checkpoint_exits_2_naming_it(run_4, tmp_path):
    from albert_tf import AlbertPretrainer
    from albert_tf.convert import __main__ as convert

    directory = AlbertPretrainer.from_pretrained(run_4).save_pretrained(tmp_path / "pretrained")
    tf1 = tmp_path / "tf1"
    result = run_in_process(convert, ["--from=albert_tf", f"--input={directory}", "--to=tf1", f"--output={tf1}"])
    assert result.returncode == 0, result.stderr[-3000:]
    (index,) = glob.glob(str(tf1 / "*.index"))
    prefix = index[: -len(".index")]
    cut_short(data_file(prefix))
    result = run_in_process(convert, ["--from=tf1", f"--input={tf1}", "--to=albert_tf", f"--output={tmp_path / 'back'}",
                                      f"--albert_config_file={run_4 / 'albert_config.json'}"])
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"the checkpoint {prefix} is damaged: its data is cut short" in result.stderr
    assert not (tmp_path / "back").exists()


def test_pretraining_input_cut_short_or_changed_exits_2_naming_it(pretraining_records, tiny_config_file, tmp_path):
    records, _ = pretraining_records
    copies = [str(shutil.copy(path, tmp_path / os.path.basename(path))) for path in records]
    cut_short(copies[1], keep=0.3)  # TensorFlow would read it as if it ended at its last whole record
    result = run_in_process(run_pretraining, pretrain_args(copies, tmp_path / "run", tiny_config_file,
                                                           "--num_train_steps=2"))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"damaged input: {copies[1]}: cut short" in result.stderr
    assert copies[0] not in result.stderr  # the intact one is not named

    shutil.copy(records[1], copies[1])
    flip_a_bit(type(tmp_path)(copies[1]))  # a record's data changed: TensorFlow's DataLossError names no file
    result = run_in_process(run_pretraining, pretrain_args(copies, tmp_path / "run2", tiny_config_file,
                                                           "--num_train_steps=2"))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"damaged input: {copies[1]}: corrupt record" in result.stderr and copies[0] not in result.stderr


def last_record_start(data):
    """Where the last record of TFRecord bytes `data` begins."""
    start = end = 0
    while end < len(data):
        start, end = end, end + 16 + struct.unpack("<Q", data[end:end + 8])[0]
    return start


def test_an_input_not_the_size_albert_tf_wrote_is_named_before_reading(pretraining_records, tmp_path):
    """The writer records each file's size in its marker; a file cut exactly where a record
    ends (whole records, nothing for the header walk to find) is named by its size; with a
    marker of 0.2.0 (no size) it is read as it is; a file written again gets its new size."""
    from albert_tf.data.record_check import FIX, check_inputs
    from albert_tf.storage import integrity, outputs
    from albert_tf.storage.integrity import DamagedFileError

    records, _ = pretraining_records
    copy = str(shutil.copy(records[0], tmp_path / "train.tfrecord"))
    marker = outputs.marker_path(copy, outputs.PRETRAINING_DATA)
    shutil.copy(outputs.marker_path(records[0], outputs.PRETRAINING_DATA), marker)
    size = os.path.getsize(copy)
    assert outputs.read_marker(copy, outputs.PRETRAINING_DATA)["size"] == size
    check_inputs([copy])
    with open(copy, "rb") as f:
        end = last_record_start(f.read())
    os.truncate(copy, end)
    with pytest.raises(DamagedFileError) as named:
        check_inputs([records[1], copy])
    assert str(named.value) == (f"damaged input: {copy}: cut short: {end} bytes, where albert_tf wrote {size} (the "
                                f"size its marker .train.tfrecord.albert_tf_output.json records). {FIX}")
    with open(marker, encoding="utf-8") as f:
        old = {k: v for k, v in json.load(f).items() if k != "size"}
    with open(marker, "w", encoding="utf-8") as f:
        json.dump(old, f)
    check_inputs([copy])
    # written again: the old size goes just before the new file takes its name, the new size after
    with integrity.sizes_recorded([copy], outputs.PRETRAINING_DATA):
        integrity._keep_size(copy, outputs.PRETRAINING_DATA, size)
        integrity.forget_sizes([copy], outputs.PRETRAINING_DATA)
        assert "size" not in outputs.read_marker(copy, outputs.PRETRAINING_DATA)
        shutil.copy(records[1], copy)
    assert outputs.read_marker(copy, outputs.PRETRAINING_DATA)["size"] == os.path.getsize(records[1]) != size


GCS_CUT = r"""
import json
import gcs_emulator

with gcs_emulator.start(CERTS) as bucket:
    import tensorflow as tf
    from conftest import run_in_process
    from test_damaged_files import last_record_start
    from albert_tf import create_pretraining_data, run_pretraining
    from albert_tf.data.record_check import check_inputs
    from albert_tf.storage import atomic, outputs

    made = run_in_process(create_pretraining_data, [f"--output_file={bucket}/data/train.tfrecord", *DATA_ARGS])
    assert made.returncode == 0, made.stderr
    whole, cut = (f"{bucket}/data/train.tfrecord-0000{k}-of-00002" for k in range(2))
    marker = outputs.read_marker(cut, outputs.PRETRAINING_DATA)
    results = {"recorded": marker.get("size"), "size": tf.io.gfile.stat(cut).length}
    check_inputs([whole, cut])
    with tf.io.gfile.GFile(cut, "rb") as f:
        data = f.read()
    end = last_record_start(data) + 5  # 5 bytes into the last record's 12-byte header
    with tf.io.gfile.GFile(cut, "wb") as f:
        f.write(data[:end])
    run = run_in_process(run_pretraining, [f"--input_file={whole},{cut}", *RUN_ARGS])
    results.update(whole=whole, cut=cut, end=end, returncode=run.returncode, stderr=run.stderr[-3000:])
    del marker["size"]  # a marker of 0.2.0: the file is not checked
    atomic.write_json(outputs.marker_path(cut, outputs.PRETRAINING_DATA), marker)
    check_inputs([whole, cut])
    print("RESULTS " + json.dumps(results))
"""


@pytest.mark.real_process
def test_a_pretraining_input_on_gs_cut_short_exits_2_naming_it(sample_corpus, spm_model, tiny_config_file,
                                                               tmp_path):
    """TensorFlow's own gs:// client against the emulator (tests/gcs_emulator.py): data
    create_pretraining_data wrote to gs://, one shard cut inside a record's header (TensorFlow
    would read it as if it ended at the record before, silently): run_pretraining exits 2
    before any work naming it, by the size its marker recorded (the file is not read)."""
    import gcs_emulator

    corpus = tmp_path / "corpus.txt"
    with open(sample_corpus, encoding="utf-8") as f:
        corpus.write_text(f.read()[:20_000], encoding="utf-8")
    data_args = [f"--input_file={corpus}", f"--spm_model_file={spm_model}", "--max_seq_length=128",
                 "--max_predictions_per_seq=20", "--dupe_factor=1", "--num_workers=1", "--num_output_shards=2"]
    run_args = pretrain_args([], tmp_path / "run", tiny_config_file, "--num_train_steps=2")[1:]
    results = gcs_emulator.run_script(GCS_CUT, str(tmp_path), DATA_ARGS=data_args, RUN_ARGS=run_args)
    assert results["recorded"] == results["size"] > 0
    code, err = results["returncode"], results["stderr"]
    assert code == 2 and "Traceback" not in err, err
    assert (f"damaged input: {results['cut']}: cut short: {results['end']} bytes, where albert_tf wrote "
            f"{results['size']} (the size its marker " in err), err
    assert f"{results['whole']}:" not in err


def test_a_damaged_feature_cache_is_rebuilt_saying_so(tmp_path):
    from albert_tf.data import feature_cache
    from albert_tf.data.feature_cache import FeatureKind, RecordEncoder, load_or_build, write_feature_file

    kind = FeatureKind("albert_tf test features", format=1, shapes=lambda s: {"ids": (s["width"],)})
    settings = {"width": 4}
    path = str(tmp_path / "train.tfrecord")
    encoder = RecordEncoder(["ids"])

    def build():
        write_feature_file((encoder.encode_int64({"ids": [i] * 4}) for i in range(50)), path, kind, settings)

    assert load_or_build(path, settings, kind, build).rebuilt
    assert not load_or_build(path, settings, kind, build).rebuilt
    cut_short(path)
    outcome = load_or_build(path, settings, kind, build)
    assert outcome.rebuilt and f"{path} is damaged" in outcome.reason and "cut short" in outcome.reason
    flip_a_bit(type(tmp_path)(path))  # the same size, a record's checksum differs
    outcome = load_or_build(path, settings, kind, build)
    assert outcome.rebuilt and "damaged" in outcome.reason and path in outcome.reason, outcome.reason
    assert feature_cache.read_feature_arrays(path, kind)["ids"].shape == (50, 4)


@pytest.fixture(scope="module")
def classifier_run(spm_model, tmp_path_factory):
    """A 2-step CoLA-layout fine-tuning run (ckpt-1, ckpt-2, each evaluated: best/) and its
    command's arguments."""
    from albert_tf import run_classifier

    base = tmp_path_factory.mktemp("classifier")
    data = base / "cola"
    data.mkdir()
    rows = [f"src\t{i % 2}\t\t{'networks route the packets' if i % 2 else 'the model reads the text'} {i}"
            for i in range(32)]
    (data / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (data / "dev.tsv").write_text("\n".join(rows[:16]) + "\n", encoding="utf-8")
    (data / "test.tsv").write_text("id\tsentence\n0\tthe model reads the text\n", encoding="utf-8")
    config = write_tiny_config(base, num_hidden_layers=1, num_hidden_groups=1)
    common = ["--task_name=cola", f"--data_dir={data}", "--max_seq_length=32", "--train_batch_size=16",
              "--eval_batch_size=16", f"--spm_model_file={spm_model}", f"--albert_config_file={config}",
              "--save_checkpoints_steps=1", "--iterations_per_loop=1", "--dtype_policy=float32"]
    run = base / "run"
    result = run_in_process(run_classifier, [*common, f"--output_dir={run}", "--do_train", "--do_eval",
                                             "--train_step=2"])
    assert result.returncode == 0, result.stderr[-3000:]
    return run, common


def test_fine_tuning_resumes_past_a_damaged_checkpoint_and_its_readers_exit_2(classifier_run, spm_model, tmp_path):
    from albert_tf import run_classifier
    from albert_tf.convert import __main__ as convert

    run, common = classifier_run
    damaged = copy_run(run, tmp_path)
    shutil.rmtree(damaged / "best")  # (what a damaged best/ does: the test below) convert would read it
    cut_short(data_file(damaged / "ckpt-2"))
    # evaluation alone only reads: the damaged newest checkpoint is named, nothing is set aside
    result = run_in_process(run_classifier, [*common, f"--output_dir={damaged}", "--do_eval"])
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"the newest checkpoint {damaged / 'ckpt-2'} is damaged: its data is cut short" in result.stderr
    assert not glob.glob(str(damaged / "*.damaged-*"))
    # and so does convert (the run's model from its newest checkpoint)
    result = run_in_process(convert, ["--from=albert_tf", f"--input={damaged}", "--to=hf",
                                      f"--spm_model_file={spm_model}", f"--output={tmp_path / 'hf'}"])
    assert result.returncode == 2 and f"the checkpoint {damaged / 'ckpt-2'} is damaged" in result.stderr, \
        result.stderr[-3000:]
    # training continues from ckpt-1
    result = run_in_process(run_classifier, [*common, f"--output_dir={damaged}", "--do_train", "--train_step=3"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"damaged checkpoint {damaged / 'ckpt-2'}: its data is cut short; set aside as" in result.stdout
    assert f"resuming from {damaged / 'ckpt-1'} at step 1" in result.stdout
    assert (damaged / "ckpt-3.index").exists() and len(glob.glob(str(damaged / "ckpt-2.damaged-*"))) == 1


def flip_a_bit_of_the_model(prefix):
    """Flips a bit inside the largest model variable's bytes in the checkpoint's data file
    (the middle of the file may fall in the optimizer's, which convert does not read)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(prefix))
    names = [n for n in reader.get_variable_to_shape_map() if n.startswith("model/")]
    value = max((reader.get_tensor(n) for n in names), key=np.size).tobytes()
    path = type(prefix)(data_file(prefix))
    data = bytearray(path.read_bytes())
    data[data.index(value) + len(value) // 2] ^= 1
    path.write_bytes(bytes(data))


BEST_DAMAGE = {"data_cut_short": (DAMAGE["data_cut_short"][0], "its data is cut short"),
               "model_bytes_changed": (flip_a_bit_of_the_model, "its data changed"),
               "index_missing": (DAMAGE["index_missing"][0], "its index file {}.index is missing")}


@pytest.mark.parametrize("kind", sorted(BEST_DAMAGE))
def test_a_damaged_best_checkpoint_stops_its_readers_and_a_resumed_training_run_sets_it_aside(
        classifier_run, spm_model, tmp_path, kind):
    from albert_tf import run_classifier
    from albert_tf.convert import __main__ as convert
    from albert_tf.storage import integrity

    run, common = classifier_run
    damaged = copy_run(run, tmp_path)
    (index,) = glob.glob(str(damaged / "best" / "ckpt-*.index"))
    best = index[: -len(".index")]
    damage, what = BEST_DAMAGE[kind]
    damage(type(damaged)(best))
    what = what.format(os.path.basename(best))
    before = sorted(os.listdir(damaged))
    # evaluation, prediction and the export from best/ alone: exit 2 naming it, nothing written
    result = run_in_process(run_classifier, [*common, f"--output_dir={damaged}", "--do_eval", "--do_predict",
                                             f"--export_dir={tmp_path / 'export'}"])
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"the best checkpoint of {damaged}: the checkpoint {best} is damaged: {what}" in result.stderr
    assert sorted(os.listdir(damaged)) == before and not (tmp_path / "export").exists()
    # convert (and export_litert: the same loader) read a fine-tuning run's best/
    result = run_in_process(convert, ["--from=albert_tf", f"--input={damaged}", "--to=hf",
                                      f"--spm_model_file={spm_model}", f"--output={tmp_path / 'hf'}"])
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"the checkpoint {best} is damaged: {what}" in result.stderr and not (tmp_path / "hf").exists()
    # the training command resumed: best/ set aside whole, chosen anew from the checkpoint it continues from
    steps = 3 if kind == "data_cut_short" else 2  # one goes on training: its evaluation is offered too
    result = run_in_process(run_classifier, [*common, f"--output_dir={damaged}", "--do_train", "--do_eval",
                                             f"--train_step={steps}"])
    assert result.returncode == 0, result.stderr[-3000:]
    (aside,) = glob.glob(str(damaged / "best.damaged-*"))
    assert f"damaged best checkpoint {best}: {what}" in result.stdout, result.stdout
    assert f"; set aside as {aside}; the best checkpoint is chosen anew from {damaged / 'ckpt-2'} on" in result.stdout
    assert {"best_metrics.json", "checkpoint", os.path.basename(best) + ".data-00000-of-00001"} <= set(
        os.listdir(aside))  # kept whole
    with open(damaged / "best" / "best_metrics.json", encoding="utf-8") as f:
        fresh = json.load(f)
    assert fresh["step"] in range(2, steps + 1) and fresh["checkpoint"] == f"ckpt-{fresh['step']}"
    integrity.check_checkpoint(str(damaged / "best" / fresh["checkpoint"]), "best/")  # whole
