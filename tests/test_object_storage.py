"""Every path on an object store: the file layer (albert_tf/storage/files.py) end to end on
TensorFlow's in-memory `ram://` filesystem (served by the same `tf.io.gfile` layer as gs://):
pretraining data, a pretraining run and its resume, the export and a fine-tuning run from
the export, every file where the flags point and nothing written locally; and the refusals
of an unreachable or unwritable store (exit 2 naming the flag, nothing left)."""

import json
import os
import tempfile
import uuid

import pytest
import tensorflow as tf

from conftest import run_in_process

gfile = tf.io.gfile


def _ram(*parts):
    return "ram://" + "/".join(parts)


def _put(local, url):
    gfile.makedirs(url.rsplit("/", 1)[0])
    gfile.copy(local, url, overwrite=True)
    return url


def _tree(url):
    """The files under `url`, relative, sorted."""
    return sorted(os.path.relpath(os.path.join(d, n), url).replace(os.sep, "/")
                  for d, _, names in gfile.walk(url) for n in names)


def _records(url):
    return [json.loads(line) for line in gfile.GFile(url).read().splitlines() if line.strip()]


@pytest.fixture
def clean_local(tmp_path, monkeypatch):
    """A fresh empty working directory and temporary directory; both must stay empty."""
    cwd, tmp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    yield cwd, tmp
    assert not os.listdir(cwd), f"written locally in the working directory: {os.listdir(cwd)}"
    # (but TensorFlow's own: autograph keeps the source of the functions it converted there)
    left = [n for n in os.listdir(tmp) if not n.startswith("__autograph_generated_file")]
    assert not left, f"left in the temporary directory: {left}"
    assert not os.path.exists(os.path.join(str(cwd), "ram:"))


def test_data_pretraining_resume_export_and_fine_tuning_all_on_ram(sample_corpus, spm_model, clean_local):
    from albert_tf import create_pretraining_data, run_classifier, run_pretraining
    from albert_tf.modeling.config import AlbertConfig

    bucket = _ram(f"bucket-{uuid.uuid4().hex[:8]}")
    # the inputs are copied into the store first: a small corpus, the SentencePiece model, a config
    with open(sample_corpus, encoding="utf-8") as f:
        text = f.read()[:60_000]
    corpus = f"{bucket}/in/corpus.txt"
    gfile.makedirs(f"{bucket}/in")
    with gfile.GFile(corpus, "w") as f:
        f.write(text)
    spm = _put(spm_model, f"{bucket}/in/sample.model")
    config = f"{bucket}/in/albert_config.json"
    AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000, num_hidden_layers=1,
                                                    num_hidden_groups=1).to_json_file(config)

    data = run_in_process(create_pretraining_data, [
        f"--input_file={corpus}", f"--output_file={bucket}/data/train.tfrecord", f"--spm_model_file={spm}",
        "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=1", "--num_workers=1"])
    assert data.returncode == 0, data.stderr[-3000:]
    assert _tree(f"{bucket}/data") == sorted([".train.tfrecord.albert_tf_output.json",
                                       ".summary_train.tfrecord.json.albert_tf_output.json",
                                       "summary_train.tfrecord.json", "train.tfrecord"])

    run = f"{bucket}/run"
    common = [f"--input_file={bucket}/data/train.tfrecord", f"--output_dir={run}", f"--albert_config_file={config}",
              "--max_seq_length=64", "--max_predictions_per_seq=10", "--train_batch_size=4",
              "--iterations_per_loop=2", "--save_checkpoints_steps=2", "--learning_rate=0.005",
              "--num_warmup_steps=1", "--dtype_policy=float32"]
    first = run_in_process(run_pretraining, [*common, "--num_train_steps=2"])
    assert first.returncode == 0, first.stderr[-3000:]
    export = f"{bucket}/export"
    resumed = run_in_process(run_pretraining, [*common, "--num_train_steps=4", f"--export_dir={export}",
                                               f"--spm_model_file={spm}"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stdout
    files = _tree(run)
    for name in ("run_info.json", "metrics.jsonl", ".albert_tf_output.json", "checkpoint", "ckpt-4.index",
                 "training_curves.png"):
        assert name in files, (name, files)
    assert any(n.startswith("train/events.out.tfevents") for n in files), files
    assert not [n for n in files if ".tmp-" in n or ".old-" in n], files
    assert [r["step"] for r in _records(f"{run}/metrics.jsonl") if r["split"] == "train"] == [2, 4]
    info = json.loads(gfile.GFile(f"{run}/run_info.json").read())
    assert len(info["sessions"]) == 2
    assert {"encoder/saved_model.pb", "preprocess/saved_model.pb", ".albert_tf_output.json"} <= set(_tree(export))

    glue = f"{bucket}/cola"
    rows = [f"src\t{i % 2}\t\t{'the network packet' if i % 2 else 'a quiet garden'} {i}" for i in range(16)]
    for split in ("train", "dev"):
        with gfile.GFile(f"{glue}/{split}.tsv", "w") as f:
            f.write("\n".join(rows) + "\n")
    cls = f"{bucket}/cola_run"
    tuned = run_in_process(run_classifier, [
        "--task_name=cola", f"--data_dir={glue}", f"--output_dir={cls}", f"--albert_hub_module_handle={export}",
        "--max_seq_length=32", "--train_batch_size=8", "--eval_batch_size=8", "--train_step=2",
        "--save_checkpoints_steps=2", "--iterations_per_loop=2", "--do_train", "--do_eval",
        "--dtype_policy=float32", f"--export_dir={bucket}/cola_export"])
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    files = _tree(cls)
    for name in ("run_info.json", "metrics.jsonl", "eval_results.json", ".albert_tf_output.json"):
        assert name in files, (name, files)
    assert ".albert_tf_output.json" in _tree(f"{bucket}/cola_export")


def test_train_sentencepiece_reads_and_writes_on_ram(sample_corpus, spm_model, clean_local):
    """SentencePiece's trainer works on local scratch files (a local temporary directory for a
    URL, removed after); the model lands where --model_prefix points, the library's bytes."""
    from tools import train_sentencepiece

    corpus = _put(sample_corpus, _ram("spm", "in", "corpus.txt"))
    prefix = _ram("spm", "out", "tool")
    result = run_in_process(train_sentencepiece, [f"--input_file={corpus}", f"--model_prefix={prefix}",
                                                  "--vocab_size=3000", "--num_threads=1"])
    assert result.returncode == 0, result.stderr[-1500:]
    assert gfile.GFile(prefix + ".model", "rb").read() == open(spm_model, "rb").read()
    assert gfile.GFile(prefix + ".vocab").readline() == "<pad>\t0\n"
    assert [n for n in _tree(_ram("spm", "out")) if not n.startswith(".")] == ["tool.model", "tool.vocab"]


def test_an_unwritable_or_unreachable_store_exits_2_naming_the_flag_and_leaves_nothing(spm_model, clean_local,
                                                                                        tmp_path, monkeypatch):
    from albert_tf import create_pretraining_data

    from albert_tf.storage import files

    corpus = f"{_ram('in-' + uuid.uuid4().hex[:8])}/corpus.txt"
    with gfile.GFile(corpus, "w") as f:
        f.write("One sentence here.\nAnother one there.\n\nA second document.\nIts second line.\n")
    # a scheme no filesystem serves: refused before any work, the flag named
    result = run_in_process(create_pretraining_data, [
        f"--input_file={corpus}", "--output_file=nosuchscheme://bucket/out.tfrecord", f"--spm_model_file={spm_model}"])
    assert result.returncode == 2, result.stderr[-2000:]
    assert "--output_file=nosuchscheme://bucket/out.tfrecord" in result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr

    # a local directory that cannot be written (the tests run as root, who may write anywhere: os.access says no)
    with monkeypatch.context() as patched:
        patched.setattr(os, "access", lambda path, mode: False)
        with pytest.raises(files.UnreachablePath, match=r"--output_dir=runs/x: .* cannot be written \(no permission"):
            files.check_reachable("runs/x", "--output_dir", write=True)

    # a store that does not answer: the wait is bounded (files.PROBE_SECONDS; here 0.2 s)
    import threading
    import time

    hang = threading.Event()

    class Silent:  # a gfile whose every call waits (an unreachable host, retried)
        def __getattr__(self, name):
            return lambda *args, **kwargs: hang.wait(2)

    started = time.monotonic()
    monkeypatch.setattr(files, "_gfile", Silent)
    with pytest.raises(files.UnreachablePath, match=r"--output_dir=gs://slow/run: the store did not answer "
                                                     r"within 0.2 s"):
        files.check_reachable("gs://slow/run", "--output_dir", write=True, seconds=0.2)
    assert time.monotonic() - started < 5
    # the command: no call on the store before the bounded probe (50 shard names are only names; a
    # look at each first waited 50 times over)
    monkeypatch.setattr(files, "PROBE_SECONDS", 0.2)
    local = tmp_path / "corpus.txt"
    local.write_text("One sentence here.\nAnother one there.\n\nA second document.\nIts second line.\n")
    started = time.monotonic()
    result = run_in_process(create_pretraining_data, [
        f"--input_file={local}", "--output_file=gs://slow/data/train.tfrecord", "--num_output_shards=50",
        f"--spm_model_file={spm_model}"])
    assert time.monotonic() - started < 5
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].endswith(
        "--output_file=gs://slow/data/train.tfrecord-00000-of-00050: the store did not answer within 0.2 s; check "
        "the address and the network, then run again."), result.stderr[-2000:]
    hang.set()


def test_join_split_and_dirname_keep_the_scheme():
    from albert_tf.storage import files

    assert files.join("gs://b", "run", "ckpt-2") == "gs://b/run/ckpt-2"
    assert files.join("gs://b/run/", "metrics.jsonl") == "gs://b/run/metrics.jsonl"
    assert files.join("gs://b/run", "gs://c/x") == "gs://c/x"
    assert files.split("gs://b/run/metrics.jsonl") == ("gs://b/run", "metrics.jsonl")
    assert files.dirname("ram://b/run/") == "ram://b" and files.basename("ram://b/run/") == "run"
    assert files.abspath("gs://b/run/") == "gs://b/run"
    assert files.join("runs", "x") == os.path.join("runs", "x") and not files.is_url("runs/x")


@pytest.mark.real_process
def test_the_layer_imports_no_tensorflow_for_local_paths(tmp_path):
    import subprocess
    import sys

    code = ("import sys; from albert_tf.storage import atomic, files, outputs\n"
            f"d = {str(tmp_path)!r}\n"
            "atomic.write_text(files.join(d, 'a.txt'), 'x'); assert files.read_text(files.join(d, 'a.txt')) == 'x'\n"
            "assert files.isfile(files.join(d, 'a.txt')) and files.glob(files.join(d, '*.txt'))\n"
            "from albert_tf.data import writer, files as data_files, tokenization\n"
            "assert 'tensorflow' not in sys.modules, 'TensorFlow imported for a local path'\n")
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_atomic_writes_on_ram_replace_whole_files_and_directories_marker_last(monkeypatch, clean_local):
    from albert_tf.storage import atomic, files, outputs

    base = _ram(f"atomic-{uuid.uuid4().hex[:8]}")
    atomic.write_text(f"{base}/a.txt", "one")
    atomic.append_line(f"{base}/a.txt", "two")
    assert files.read_text(f"{base}/a.txt") == "onetwo\n"
    assert files.exists(f"{base}/a.txt") and not files.exists(f"{base}/a.t") and not files.isdir(f"{base}/a")
    copied = []
    real_copy = files.copy
    monkeypatch.setattr(files, "copy", lambda a, b: copied.append(files.basename(b)) or real_copy(a, b))
    for version in ("old", "new"):
        with outputs.replacing_dir(f"{base}/export", outputs.EXPORT) as tmp:
            atomic.write_text(files.join(tmp, "weights.bin"), version)
            files.makedirs(files.join(tmp, "sub"))
            atomic.write_text(files.join(tmp, "sub", "x"), version)
    assert files.read_text(f"{base}/export/weights.bin") == "new"
    assert _tree(f"{base}/export") == [".albert_tf_output.json", "sub/x", "weights.bin"]
    assert copied[-1] == outputs.MARKER, copied  # the marker arrives last
    assert not [n for n in files.listdir(base) if ".tmp-" in n or ".old-" in n]
    # a killed writer's temporary: kept while young (another machine may be writing it), swept when stale
    stale = f"{base}/.b.txt.tmp-99999999-0123abcd.txt"
    with gfile.GFile(stale, "w") as f:
        f.write("partial")
    assert atomic.sweep(base) == [] and files.exists(stale)
    import time

    monkeypatch.setattr(files, "getmtime", lambda path: time.time() - files.STALE_SECONDS - 60)  # ram:// keeps no times
    assert atomic.sweep(base) == [files.basename(stale)] and not files.exists(stale)


GCS_SCRIPT = r'''
import json
import gcs_emulator

with gcs_emulator.start(CERTS) as bucket:
    import tensorflow as tf
    from conftest import run_in_process
    from albert_tf import create_pretraining_data, run_pretraining
    from albert_tf.modeling.config import AlbertConfig

    g = tf.io.gfile

    def names(url):
        try:
            return sorted(g.listdir(url))
        except tf.errors.OpError as e:
            return [f"(not listed: {type(e).__name__})"]

    with open(CORPUS, encoding="utf-8") as f:
        text = f.read()[:20_000]
    with g.GFile(f"{bucket}/in/corpus.txt", "w") as f:
        f.write(text)
    g.copy(SPM, f"{bucket}/in/sample.model")
    AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000, num_hidden_layers=1,
                                                    num_hidden_groups=1).to_json_file(f"{bucket}/in/albert_config.json")
    import time
    results, started = {"seconds": {}}, time.time()
    data = run_in_process(create_pretraining_data, [
        f"--input_file={bucket}/in/corpus.txt", f"--output_file={bucket}/data/train.tfrecord",
        f"--spm_model_file={bucket}/in/sample.model", "--max_seq_length=64", "--max_predictions_per_seq=10",
        "--dupe_factor=1", "--num_workers=1"])
    results["seconds"]["data"] = time.time() - started
    results["data"] = [data.returncode, data.stderr[-2000:], names(f"{bucket}/data")]
    run = run_in_process(run_pretraining, [
        f"--input_file={bucket}/data/train.tfrecord", f"--output_dir={bucket}/run",
        f"--albert_config_file={bucket}/in/albert_config.json", "--max_seq_length=64",
        "--max_predictions_per_seq=10", "--train_batch_size=4", "--iterations_per_loop=2",
        "--save_checkpoints_steps=2", "--num_train_steps=2", "--num_warmup_steps=1", "--dtype_policy=float32"])
    results["seconds"]["run"] = time.time() - started
    results["run"] = [run.returncode, run.stderr[-2000:], names(f"{bucket}/run")]
    missing = run_in_process(create_pretraining_data, [
        f"--input_file={bucket}/in/corpus.txt", "--output_file=gs://no-such-bucket/train.tfrecord",
        f"--spm_model_file={bucket}/in/sample.model"])
    results["seconds"]["missing_bucket"] = time.time() - started
    results["missing_bucket"] = [missing.returncode, missing.stderr[-2000:]]
    print("RESULTS " + json.dumps(results))
'''


@pytest.mark.real_process
def test_gs_on_a_local_emulator_data_and_pretraining(sample_corpus, spm_model, tmp_path):
    """TensorFlow's own gs:// client against gcp-storage-emulator on loopback (tests/gcs_emulator.py),
    in a process of its own (the client reads its settings when TensorFlow loads)."""
    import gcs_emulator

    results = gcs_emulator.run_script(GCS_SCRIPT, str(tmp_path), CORPUS=sample_corpus, SPM=spm_model)
    print(results["seconds"])
    code, err, names = results["data"]
    assert code == 0, err
    assert {"train.tfrecord", "summary_train.tfrecord.json", ".train.tfrecord.albert_tf_output.json"} <= set(names)
    code, err, names = results["run"]
    assert code == 0, err
    assert {"run_info.json", "metrics.jsonl", ".albert_tf_output.json", "checkpoint", "ckpt-2.index",
            "training_curves.png"} <= set(names), names
    assert not [n for n in names if ".tmp-" in n], names
    code, err = results["missing_bucket"]
    assert code == 2, err
    assert err.strip().splitlines()[-1].startswith(
        "create_pretraining_data: error: --output_file=gs://no-such-bucket/train.tfrecord cannot be written"), err
    assert not os.listdir(tmp_path / "cwd"), os.listdir(tmp_path / "cwd")
