"""run_pretraining end to end: strategies, resume after SIGKILL, formats, flags. The runs call
run_pretraining.main in this process; real processes only where the process is the point
(two multi-worker processes, SIGKILL, SIGINT, two logical CPU devices)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from conftest import run_in_process
from distributed_helpers import mirrored_vs_one_device

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)


@pytest.fixture(scope="module")
def tiny_config_file(tmp_path_factory):
    from albert_tf import AlbertConfig

    path = str(tmp_path_factory.mktemp("config") / "albert_config.json")
    # one layer: what these runs check (resumption, interruptions, sessions, formats, refusals) does
    # not depend on the depth, and every run (11 of them in real processes) traces its step for less
    # than with two layers
    AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000, num_hidden_layers=1,
                                                    num_hidden_groups=1).to_json_file(path)
    return path


def pretrain_args(records, output_dir, config, *extra):
    """The arguments of `python -m albert_tf.run_pretraining` (run_pretraining.main's argv)."""
    return [f"--input_file={','.join(records)}", f"--output_dir={output_dir}", f"--albert_config_file={config}",
            "--max_seq_length=128", "--max_predictions_per_seq=20", "--train_batch_size=8", "--eval_batch_size=8",
            "--learning_rate=0.005", "--num_warmup_steps=5", "--max_eval_steps=3", *[str(a) for a in extra]]


def pretrain_cmd(records, output_dir, config, *extra):
    """pretrain_args as a real process's command line."""
    return [sys.executable, "-m", "albert_tf.run_pretraining", *pretrain_args(records, output_dir, config, *extra)]


def model_values(prefix):
    reader = tf.train.load_checkpoint(prefix)
    names = [n for n, _ in tf.train.list_variables(prefix) if n.startswith("model/")]
    return {n: reader.get_tensor(n) for n in names}


def weight_count(config_file):
    """The number of weights of the pretrainer of `config_file` (every one is compared)."""
    from albert_tf import AlbertConfig, AlbertPretrainer

    return len(AlbertPretrainer(AlbertConfig.from_json_file(config_file)).weights)


def test_mirrored_two_cpus_matches_one_device(pretraining_records):
    """2 replicas x 4 examples train as 1 x 8 (the CPU split in two logical devices: conftest)."""
    outputs, _ = pretraining_records
    data = mirrored_vs_one_device(outputs)
    assert data["mirrored"]["replicas"] == 2 and data["one_device"]["replicas"] == 1
    np.testing.assert_allclose(data["mirrored"]["losses"], data["one_device"]["losses"], atol=1e-5, rtol=0)
    assert data["mirrored"]["losses"][-1] < data["mirrored"]["losses"][0]


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _two_workers(records, config, output_dirs, *extra):
    """Starts the two workers of a cluster on loopback (worker 0 is the chief) with the same
    command but each its own --output_dir of `output_dirs`; returns (processes, addresses)."""
    cluster = {"worker": [f"127.0.0.1:{p}" for p in _free_ports(2)]}
    procs = []
    for index, output_dir in enumerate(output_dirs):
        env = dict(ENV, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}))
        procs.append(subprocess.Popen(pretrain_cmd(records, output_dir, config, "--strategy=multi_worker_mirrored",
                                                   *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env, cwd=ROOT))
    return procs, cluster["worker"]


def _finished(procs):
    """(returncode, stdout, stderr) of each process, once all have ended."""
    outs = [p.communicate(timeout=600) for p in procs]
    return [(p.returncode, stdout, stderr) for p, (stdout, stderr) in zip(procs, outs, strict=True)]


# deterministic, dropout and dynamic masking on: what must come out the same after a restart
MULTI_WORKER = ("--deterministic", "--num_train_steps=12", "--save_checkpoints_steps=4", "--iterations_per_loop=4",
                "--nodo_eval", "--dynamic_masking")


@pytest.mark.real_process
def test_two_workers_on_loopback_lose_one_stop_with_3_and_resume_exactly(pretraining_records, tiny_config_file,
                                                                        tmp_path):
    """MultiWorkerMirroredStrategy over two processes on loopback (each worker reads one of
    the two input files):
    - uninterrupted: 2 replicas; checkpoints and metrics.jsonl are the chief's alone;
    - the chief SIGKILLed after ckpt-4: the other worker exits 3 within seconds with
      `worker lost` naming worker 0 and its address and the newest checkpoint, no traceback;
    - restarted with the second worker on another --output_dir: both exit 2 before
      training (they would start at different steps);
    - restarted alike: both workers resume from the checkpoint the message named and end
      with the uninterrupted run's weights, bit for bit (before, only the chief resumed)."""
    outputs, _ = pretraining_records
    whole = tmp_path / "whole"
    procs, _ = _two_workers(outputs, tiny_config_file, [whole, whole], *MULTI_WORKER)
    for code, stdout, stderr in _finished(procs):
        assert code == 0, stderr[-3000:]
        assert "with 2 replicas" in stdout
    assert sorted(p.name for p in whole.glob("ckpt-*.index")) == ["ckpt-12.index", "ckpt-4.index", "ckpt-8.index"]
    rows = [json.loads(line) for line in open(whole / "metrics.jsonl")]
    assert [r["step"] for r in rows] == [4, 8, 12]  # written by the chief only

    killed = tmp_path / "killed"
    procs, addresses = _two_workers(outputs, tiny_config_file, [killed, killed], *MULTI_WORKER)
    deadline = time.time() + 300
    while not (killed / "ckpt-4.index").exists():
        assert all(p.poll() is None for p in procs) and time.time() < deadline, "the run ended before the kill"
        time.sleep(0.02)
    procs[0].send_signal(signal.SIGKILL)
    killed_at = time.time()
    code, _, stderr = _finished(procs)[1]
    assert time.time() - killed_at < 30
    assert code == 3, stderr[-3000:]
    assert "Traceback" not in stderr
    [line] = [line for line in stderr.splitlines() if line.startswith("run_pretraining: worker lost: ")]
    assert f"worker 0 ({addresses[0]}) is gone" in line and "this worker (worker 1)" in line, line
    newest = line.split("The newest checkpoint is ")[1].split(":")[0]
    assert newest in (str(killed / "ckpt-4"), str(killed / "ckpt-8")), line

    procs, _ = _two_workers(outputs, tiny_config_file, [killed, tmp_path / "elsewhere"], *MULTI_WORKER)
    for code, _, stderr in _finished(procs):
        assert code == 2 and "Traceback" not in stderr, stderr[-3000:]
        assert f"the workers start at different steps (0, {newest.split('-')[-1]})" in stderr, stderr[-3000:]
    assert not (tmp_path / "elsewhere").exists()

    procs, _ = _two_workers(outputs, tiny_config_file, [killed, killed], *MULTI_WORKER)
    for code, stdout, stderr in _finished(procs):
        assert code == 0, stderr[-3000:]
        assert f"resuming from {newest} at step" in stdout, stdout
    a, b = model_values(str(whole / "ckpt-12")), model_values(str(killed / "ckpt-12"))
    assert a.keys() == b.keys() and len(a) == weight_count(tiny_config_file)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


# the interruption tests' common flags; the strategy is added by each run
INTERRUPTED = ("--deterministic", "--num_train_steps=20", "--save_checkpoints_steps=5", "--iterations_per_loop=5",
               "--nodo_eval", "--dynamic_masking")


@pytest.fixture(scope="module")
def uninterrupted(pretraining_records, tiny_config_file, tmp_path_factory):
    """ckpt-20 of one uninterrupted deterministic run (default strategy): the reference of
    both interruption tests (a one_device run ended with bitwise the same weights when
    measured, so it is the reference of the one_device test too)."""
    from albert_tf import run_pretraining
    from tensorflow.python.framework import config

    outputs, _ = pretraining_records
    whole = tmp_path_factory.mktemp("uninterrupted") / "whole"
    enabled = config.is_op_determinism_enabled()
    assert run_pretraining.main(pretrain_args(outputs, whole, tiny_config_file, *INTERRUPTED)) == 0
    assert config.is_op_determinism_enabled() == enabled  # main put --deterministic's op determinism back
    return whole / "ckpt-20"


def _killed_and_restarted_matches(records, config, tmp_path, reference, common, kill_at, final=20):
    """A real process SIGKILLed after ckpt-kill_at, restarted in this process (run_pretraining.main);
    its ckpt-final must equal `reference`."""
    from albert_tf import run_pretraining

    killed = tmp_path / "killed"
    proc = subprocess.Popen(pretrain_cmd(records, killed, config, *common), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=ENV, cwd=ROOT)
    deadline = time.time() + 300
    while not (killed / f"ckpt-{kill_at}.index").exists():
        assert proc.poll() is None and time.time() < deadline, "the run ended before it could be killed"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    latest = tf.train.latest_checkpoint(str(killed))
    assert latest is not None and not latest.endswith(f"ckpt-{final}"), latest

    resumed = run_in_process(run_pretraining, pretrain_args(records, killed, config, *common))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stdout
    a, b = model_values(str(reference)), model_values(str(killed / f"ckpt-{final}"))
    assert a.keys() == b.keys() and len(a) == weight_count(config)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    return resumed.stdout


@pytest.mark.real_process
def test_sigkill_and_restart_ends_with_the_uninterrupted_weights(pretraining_records, tiny_config_file, uninterrupted,
                                                                  tmp_path):
    """Default strategy: the input position is in the checkpoint (dropout and dynamic masking on)."""
    outputs, _ = pretraining_records
    stdout = _killed_and_restarted_matches(outputs, tiny_config_file, tmp_path, uninterrupted, INTERRUPTED, 10)
    resumed_at = int(stdout.split("resuming from")[1].split("ckpt-")[1].split()[0])
    # it restarted mid-run from a checkpoint of the killed run (ckpt-10's files can exist
    # before the manager records it, so a kill in between resumes from ckpt-5)
    assert 5 <= resumed_at < 20


def test_records_in_the_release_format_train_and_export(pretraining_records, tiny_config_file, spm_model, tmp_path):
    from albert_tf import run_pretraining

    """Examples serialized by TensorFlow's own protobuf code with the release's eight
    features train; --export_dir then writes the TF-Hub-style SavedModels."""
    outputs, _ = pretraining_records
    path = str(tmp_path / "release.tfrecord")
    int_keys = ("input_ids", "input_mask", "segment_ids", "token_boundary", "masked_lm_positions",
                "masked_lm_ids", "next_sentence_labels")
    with tf.io.TFRecordWriter(path) as writer:
        for raw in tf.data.TFRecordDataset(outputs[0]).take(64):
            source = tf.train.Example.FromString(raw.numpy()).features.feature
            feature = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=list(source[k].int64_list.value)))
                       for k in int_keys}
            feature["masked_lm_weights"] = tf.train.Feature(
                float_list=tf.train.FloatList(value=list(source["masked_lm_weights"].float_list.value)))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    out = tmp_path / "run"
    result = run_in_process(run_pretraining, pretrain_args([path], out, tiny_config_file, "--num_train_steps=6",
                                                           "--save_checkpoints_steps=6", "--iterations_per_loop=3",
                                                           f"--export_dir={tmp_path / 'export'}",
                                                           f"--spm_model_file={spm_model}", "--export_seq_length=64"))
    assert result.returncode == 0, result.stderr[-3000:]
    evaluation = json.load(open(out / "eval_results.json"))
    # the evaluation ran: --max_eval_steps=3 batches of --eval_batch_size=8 examples
    assert evaluation["global_step"] == 6 and evaluation["steps"] == 3 and evaluation["examples"] == 24
    assert 0 < evaluation["masked_lm_loss"] < 20
    assert evaluation["loss"] == pytest.approx(evaluation["masked_lm_loss"] + evaluation["sentence_order_loss"])
    assert "global_step = 6\n" in (out / "eval_results.txt").read_text() and (out / "ckpt-6.index").exists()
    import tensorflow_text  # noqa: F401  (the preprocessing model's ops)

    encoder = tf.saved_model.load(str(tmp_path / "export" / "encoder"))
    preprocess = tf.saved_model.load(str(tmp_path / "export" / "preprocess"))
    outputs = encoder(preprocess(tf.constant(["a sentence to encode"])), training=False)
    assert outputs["pooled_output"].shape == (1, 32) and outputs["sequence_output"].shape == (1, 64, 32)
    # the export holds the run's final weights
    from albert_tf import AlbertConfig, AlbertPretrainer

    trained = AlbertPretrainer(AlbertConfig.from_json_file(tiny_config_file))
    tf.train.Checkpoint(model=trained).read(str(out / "ckpt-6")).expect_partial()
    ids = np.array([[2, 40, 41, 42, 3, 0]], "int32")
    x = {"input_word_ids": ids, "input_mask": (ids > 0).astype("int32"), "input_type_ids": np.zeros_like(ids)}
    np.testing.assert_allclose(encoder(x, training=False)["pooled_output"],
                               trained.encoder(x, training=False)["pooled_output"], atol=1e-5)


BAD_FLAGS = [
    ([], "--output_dir is required"),
    (["--output_dir=X", "--albert_config_file=Y", "--do_train"], "--do_train needs --input_file"),
    (["--output_dir=X", "--albert_config_file=Y", "--input_file=Z", "--strategy=tpu"], "--strategy=tpu needs --tpu"),
    (["--output_dir=X", "--albert_config_file=Y", "--input_file=Z", "--max_seq_length=16"],
     "--max_predictions_per_seq (20) exceeds --max_seq_length (16)"),
    (["--output_dir=X", "--albert_config_file=Y", "--input_file=Z", "--dtype_policy=float16"],
     "--dtype_policy='float16' is not one of auto, float32, mixed_bfloat16"),
    (["--output_dir=X", "--albert_config_file=Y", "--input_file=Z", "--dtype_policy=mixed_float16"],
     "mixed_float16 needs loss scaling"),
    (["--output_dir=X", "--albert_config_file=Y", "--input_file=Z", "--train_batch_size=0"],
     "--train_batch_size must be positive"),
]


@pytest.mark.real_process
def test_resume_without_iterator_checkpoint_skips_consumed_input(pretraining_records, tiny_config_file, uninterrupted,
                                                                 tmp_path):
    """one_device's distributed iterator cannot be checkpointed: resume fast-forwards the input
    (dynamic masking included) and ends with the uninterrupted run's weights."""
    outputs, _ = pretraining_records
    stdout = _killed_and_restarted_matches(outputs, tiny_config_file, tmp_path, uninterrupted,
                                           INTERRUPTED + ("--strategy=one_device",), 10)
    assert "steps of input already consumed" in stdout


def test_bad_flags_input_checkpoints_and_configs_fail_cleanly_before_any_work(pretraining_records, tiny_config_file,
                                                                              tmp_path):
    """Every refusal exits 2 naming the flag or file, with no traceback, all in this process
    (run_pretraining.main), in this order:
    - bad flag combinations, a missing --init_checkpoint, an unknown --strategy;
    - every input shard is checked (not only the first), the SentencePiece model of
      --export_dir before training, and an output_dir that is a file; nothing is written;
    - an --init_checkpoint whose shapes do not fit (another embedding size): the output
      directory this run made (and its parent it made) is gone, and an empty directory made
      for the run beforehand is empty again (no albert_config.json, no marker); a directory
      of the user's is refused before any work (albert_tf.storage.outputs) and keeps their
      file byte for byte;
    - resuming a run with another config is refused and keeps the run's own config."""
    from albert_tf import AlbertConfig, AlbertPretrainer

    outputs, _ = pretraining_records
    cases = [(args, message, None) for args, message in BAD_FLAGS]  # (args, message, output that must not exist)
    for extra, message in (([f"--init_checkpoint={tmp_path}/nothing"], "no checkpoint there"),
                           (["--strategy=parameter_server"], "--strategy must be one of")):
        cases.append((pretrain_args(outputs, tmp_path / "run", tiny_config_file, "--num_train_steps=2", *extra),
                      message, tmp_path / "run"))

    broken = tmp_path / "broken.tfrecord"
    with tf.io.TFRecordWriter(str(broken)) as writer:
        writer.write(tf.train.Example().SerializeToString())
    not_spm = tmp_path / "not.model"
    not_spm.write_text("not a model")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for records, out, extra, message in (
            ([*outputs, str(broken)], tmp_path / "r1", [], "broken.tfrecord: missing features"),
            (outputs, tmp_path / "r2", [f"--export_dir={tmp_path / 'e'}", f"--spm_model_file={not_spm}"],
             "is not a SentencePiece model"),
            (outputs, a_file, [], "exists and is not a directory")):
        cases.append((pretrain_args(records, out, tiny_config_file, "--num_train_steps=2", *extra), message,
                      None if out == a_file else out))

    config = AlbertConfig.from_json_file(tiny_config_file)
    wrong = AlbertPretrainer(config.replace(embedding_size=config.embedding_size * 2))
    init = wrong.save_pretrained(str(tmp_path / "wrong_shapes"))
    users = tmp_path / "users_dir"
    users.mkdir()
    (users / "notes.txt").write_bytes(b"my notes\x00\xff")
    made_for_it = tmp_path / "made_for_it"
    made_for_it.mkdir()
    new = tmp_path / "new" / "run"
    for out, message in ((new, "shape mismatches"), (made_for_it, "shape mismatches"),
                         (users, f"--output_dir={users} is a directory that albert_tf did not make")):
        cases.append((pretrain_args(outputs, out, tiny_config_file, "--num_train_steps=2",
                                   f"--init_checkpoint={init}"), message, None))

    run = tmp_path / "resumed_run"
    common = ("--num_train_steps=2", "--save_checkpoints_steps=2", "--nodo_eval")
    other = tmp_path / "other.json"
    config.replace(intermediate_size=48).to_json_file(str(other))
    refusals = len(cases)
    cases.append((pretrain_args(outputs, run, tiny_config_file, *common), None, None))  # the run, then
    cases.append((pretrain_args(outputs, run, other, "--num_train_steps=4", *common[1:]),  # its refused resume
                  "differs from the config of the run", None))

    from albert_tf import run_pretraining

    results = [run_in_process(run_pretraining, args) for args, _, _ in cases]
    for (args, message, out), result in zip(cases[:refusals], results, strict=False):
        assert result.returncode == 2, (args, result.stderr[-2000:])
        assert message in result.stderr and "Traceback" not in result.stderr, (args, result.stderr[-2000:])
        assert out is None or not out.exists(), args
    assert not (tmp_path / "new").exists()
    assert os.listdir(made_for_it) == []
    assert sorted(os.listdir(users)) == ["notes.txt"] and (users / "notes.txt").read_bytes() == b"my notes\x00\xff"

    first, second = results[refusals:]
    assert first.returncode == 0, first.stderr[-2000:]
    assert second.returncode == 2 and "Traceback" not in second.stderr, second.stderr[-2000:]
    assert "differs from the config of the run" in second.stderr and "intermediate_size" in second.stderr
    assert AlbertConfig.from_json_file(str(run / "albert_config.json")).to_dict() == config.to_dict()  # the run's own
    assert json.load(open(run / "run_info.json"))["initialized_from"] == "random"


@pytest.mark.real_process
def test_ctrl_c_ends_cleanly_and_the_run_resumes(pretraining_records, tiny_config_file, tmp_path):
    """SIGINT to a real process (what Ctrl-C in a terminal sends), then the same run resumed
    (in this process)."""
    from albert_tf import run_pretraining

    outputs, _ = pretraining_records
    out = tmp_path / "run"
    cmd = pretrain_cmd(outputs, out, tiny_config_file, "--num_train_steps=100000", "--save_checkpoints_steps=5",
                       "--iterations_per_loop=5", "--nodo_eval")
    # PYTHONFAULTHANDLER: a crash on the way out shows its Python stacks in the message below
    # (one run of the suite saw status -11 here once; 65 runs of this command alone did not)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(ENV, PYTHONFAULTHANDLER="1"), cwd=ROOT)
    deadline = time.time() + 300
    while time.time() < deadline and not list(out.glob("ckpt-*.index")):
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)  # a loaded CI machine finishes the running loop first
    assert proc.returncode == 130, stderr[-2000:]
    assert "run_pretraining: interrupted" in stderr and "Traceback" not in stderr
    assert not [p for p in os.listdir(out) if ".tmp-" in p]
    resumed = run_in_process(run_pretraining, pretrain_args(outputs, out, tiny_config_file, "--num_train_steps=10",
                                                            "--save_checkpoints_steps=5", "--iterations_per_loop=5",
                                                            "--nodo_eval"))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming from" in resumed.stdout


def test_console_scripts_are_installed_and_share_the_error_convention(tmp_path, capsys, monkeypatch):
    """pyproject.toml's console scripts (installed by `make venv` with pip install -e .);
    albert-run-pretraining's entry function (what the script runs) called in this process."""
    from albert_tf import run_pretraining

    bindir = os.path.dirname(sys.executable)
    for script in ("albert-run-pretraining", "albert-run-classifier", "albert-run-squad-v1", "albert-run-squad-v2",
                   "albert-export-tfhub", "albert-export-litert", "albert-convert",
                   "albert-param-table", "albert-create-pretraining-data"):
        path = os.path.join(bindir, script)
        assert os.access(path, os.X_OK), f"{script} is not installed in {bindir}: run `make venv`"
    script = open(os.path.join(bindir, "albert-run-pretraining"), encoding="utf-8").read()
    assert "from albert_tf.run_pretraining import entry" in script and "sys.exit(entry())" in script, script
    monkeypatch.setattr(sys, "argv", [os.path.join(bindir, "albert-run-pretraining"), f"--output_dir={tmp_path}"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        run_pretraining.entry()
    stderr = capsys.readouterr().err
    assert exited.value.code == 2 and "run_pretraining: error: --albert_config_file is required" in stderr


def _tree(path):
    """{relative path: bytes} of every file under `path`."""
    found = {}
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                found[os.path.relpath(full, path)] = f.read()
    return found


def test_every_session_is_recorded_and_a_changed_setting_is_refused(pretraining_records, tiny_config_file, tmp_path):
    """One run directory, four sessions in this process: a training; the same with another
    learning rate, batch size and (resolved) dtype policy, refused with exit 2 naming each
    change before any work (the directory byte-identical); a longer training with a changed
    learning rate and --allow_changed_settings (both recorded); evaluation alone with yet
    another rate (never refused). run_info.json holds one appended entry per session that
    ran, with versions, source state, device, the resolved policy and the flags as given.
    (A longer training alone is allowed without the flag: test_run_classifier's sts-b run.)"""
    import albert_tf
    from albert_tf import run_pretraining

    outputs, _ = pretraining_records
    run = tmp_path / "run"
    common = ("--save_checkpoints_steps=2", "--iterations_per_loop=1", "--nodo_eval", "--dtype_policy=float32")
    first = pretrain_args(outputs, run, tiny_config_file, "--num_train_steps=2", *common)
    changed = pretrain_args(outputs, run, tiny_config_file, "--num_train_steps=3", "--learning_rate=0.001",
                           "--train_batch_size=16", *common[:-1], "--dtype_policy=mixed_bfloat16")
    allowed = pretrain_args(outputs, run, tiny_config_file, "--num_train_steps=3", "--learning_rate=0.001",
                           "--allow_changed_settings", *common)
    evaluate = pretrain_args(outputs, run, tiny_config_file, "--num_train_steps=3", "--learning_rate=0.1",
                            "--nodo_train", "--do_eval", *common[:-2], "--dtype_policy=float32")
    first_run = run_in_process(run_pretraining, first)
    assert first_run.returncode == 0, first_run.stderr[-3000:]
    before = _tree(run)
    refused = run_in_process(run_pretraining, changed)
    assert _tree(run) == before  # nothing written, nothing touched
    allowed_run, evaluated = [run_in_process(run_pretraining, args) for args in (allowed, evaluate)]
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    assert refused.stdout == ""  # refused before any work
    for change in ("--learning_rate 0.005 -> 0.001", "--train_batch_size 8 -> 16",
                   "--dtype_policy (resolved) float32 -> mixed_bfloat16", "new --output_dir",
                   "--allow_changed_settings"):
        assert change in refused.stderr, (change, refused.stderr)
    assert "num_train_steps" not in refused.stderr.split("error:")[1].split(".")[0]  # a longer run is no change
    for result in (allowed_run, evaluated):
        assert result.returncode == 0, result.stderr[-3000:]
    assert "evaluating the trained checkpoint" in evaluated.stdout and "ckpt-3" in evaluated.stdout

    info = json.load(open(run / "run_info.json"))
    assert info["initialized_from"] == "random" and info["task"] == "pretraining"  # the run's start, kept
    sessions = info["sessions"]
    assert [(s["start_step"], s["final_step"], s["trains"]) for s in sessions] == [
        (0, 2, True), (2, 3, True), (3, 3, False)]
    assert [s["status"] for s in sessions] == ["finished"] * 3
    assert [s["changes"] for s in sessions] == [
        [], [{"setting": "learning_rate", "old": 0.005, "new": 0.001}, {"setting": "num_train_steps", "old": 2,
                                                                       "new": 3}], []]
    # the earlier session's entry is the one the directory held before (appended, never rewritten)
    assert json.loads(before["run_info.json"])["sessions"] == sessions[:1]
    for s in sessions:
        assert s["command"] == "run_pretraining" and s["dtype_policy"] == "float32"
        assert s["flags"]["input_file"] == ",".join(outputs) and s["flags"]["output_dir"] == str(run)
        assert s["flags"]["albert_config_file"] == tiny_config_file and "verbosity" not in s["flags"]
        assert s["albert_tf"]["version"] == albert_tf.__version__
        assert len(s["albert_tf"].get("git_commit", "")) == 40 or len(s["albert_tf"]["sha256"]) == 64
        assert s["tensorflow"] == tf.__version__ and s["keras"]
        assert s["device"]["cpu"] and isinstance(s["device"]["gpus"], list) and s["device"]["replicas"] == 1
    assert sessions[1]["flags"]["learning_rate"] == 0.001 and sessions[1]["allow_changed_settings"] is True
    assert sessions[1]["settings"]["learning_rate"] == 0.001 and sessions[2]["flags"]["learning_rate"] == 0.1


def test_sigterm_saves_the_current_step_exits_143_and_the_run_resumes_from_it(pretraining_records,
                                                                              tiny_config_file, tmp_path):
    """SIGTERM (what preemptible machines and schedulers send) mid-training: a checkpoint at
    the step reached (no regular save before the end), exit status 143 with the message;
    the same command resumes from that step and ends at --num_train_steps. In this process:
    a timer thread sends SIGTERM to it while run_pretraining.main trains (main installs its
    handler in the main thread; a signal after main returned meets the test's own handler)."""
    import threading

    from albert_tf import run_pretraining

    outputs, _ = pretraining_records
    out = tmp_path / "run"
    args = pretrain_args(outputs, out, tiny_config_file, "--num_train_steps=20", "--save_checkpoints_steps=1000",
                         "--iterations_per_loop=1", "--nodo_eval")
    metrics = out / "metrics.jsonl"
    finished, late = threading.Event(), []

    def terminate():
        deadline = time.time() + 300
        while not (metrics.exists() and '"train"' in metrics.read_text()):
            if finished.is_set() or time.time() > deadline:
                return
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, lambda signum, frame: late.append(signum))
    sender = threading.Thread(target=terminate, daemon=True)
    try:
        sender.start()
        result = run_in_process(run_pretraining, args)
        finished.set()
        sender.join()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not late, "SIGTERM came after the run ended"
    assert result.returncode == 143, result.stderr[-3000:]
    saved = tf.train.latest_checkpoint(str(out))
    step = int(saved.rsplit("ckpt-", 1)[1])
    assert 1 <= step < 20, saved
    assert f"terminated (SIGTERM). Saved the checkpoint {saved} at step {step}" in result.stderr
    assert "Traceback" not in result.stderr
    assert tf.train.load_checkpoint(saved).get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == step
    resumed = run_in_process(run_pretraining, args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {saved} at step {step}" in resumed.stdout
    assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-20")
    sessions = json.load(open(out / "run_info.json"))["sessions"]
    assert [(s["start_step"], s["final_step"], s["status"]) for s in sessions] == [(0, step, "terminated"),
                                                                                   (step, 20, "finished")]
