"""One writer per output (albert_tf.storage.lock): an output that a live albert_tf process writes
is refused to every other writing command before any work (exit 2, naming the output, the
holder and what to do); a command that only reads a run is not, and reads its newest complete
checkpoint; a holder that is gone is taken over with a message. Real processes throughout: a
real run_pretraining beside a second one, and a tiny holder process (HOLDER: the lock taken as
a command takes it) that the commands run in this process meet; the lease on an object store
against the gs:// emulator (tests/gcs_emulator.py)."""

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import run_in_process
from test_output_rule import COMMANDS, _arguments, _tree, inputs, run_command  # noqa: F401 (inputs: their fixture)

from albert_tf.storage import lock, outputs

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=os.pathsep.join([ROOT, TESTS]))

# holds the outputs of argv[2] ([flag, path, kind] triples) as command argv[1] does, until its stdin closes
HOLDER = r"""
import json, sys
from albert_tf.storage import lock, outputs
with lock.command(sys.argv[1]):
    outputs.check([outputs.Output(*item) for item in json.loads(sys.argv[2])])
    print("holding", flush=True)
    sys.stdin.read()
"""


def start_holder(command, items, env=None):
    """A real process holding outputs `items` ((flag, path, kind)) as `command`; returns it once it holds them."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, command, json.dumps(items)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or ENV, cwd=ROOT)
    line = proc.stdout.readline()
    assert line == "holding\n", proc.communicate()[1][-3000:]
    return proc


def let_go(proc):
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0, proc.stderr.read()[-3000:]


def assert_names_the_holder(err, flag, path, holder, command):
    """The refusal: exit 2's one line naming the output, the holder (command, process id, this
    machine, since when) and what to do; no traceback."""
    assert "Traceback" not in err, err
    assert f"{flag}={path} is being written by {command} (process {holder.pid} on this machine, " \
           f"{socket.gethostname()}), since {time.strftime('%Y-%m-%d')}" in err, err
    assert f"let that command end or stop it (kill {holder.pid}), or choose another {flag}." in err, err


# ----------------------------------------------------------------------------------------------------------
# two real runs on one local output; a reader beside a writer


def pretrain_cmd(records, output_dir, config, *extra):
    return [sys.executable, "-m", "albert_tf.run_pretraining", f"--input_file={','.join(records)}",
            f"--output_dir={output_dir}", f"--albert_config_file={config}", "--max_seq_length=128",
            "--max_predictions_per_seq=20", "--train_batch_size=8", "--eval_batch_size=8", "--max_eval_steps=2",
            "--learning_rate=0.005", "--num_warmup_steps=2", *extra]


@pytest.fixture(scope="module")
def two_runs(pretraining_records, tmp_path_factory):
    """A real run_pretraining, and the same command started in a second real process once the
    first holds --output_dir: (first, second, run directory, whether the first still ran when
    the second ended)."""
    from albert_tf import AlbertConfig

    root = tmp_path_factory.mktemp("two_runs")
    config = str(root / "albert_config.json")
    AlbertConfig.from_preset("albert_tiny").replace(vocab_size=3000, num_hidden_layers=1,
                                                    num_hidden_groups=1).to_json_file(config)
    run = root / "run"
    command = pretrain_cmd(pretraining_records[0], run, config, "--num_train_steps=40", "--save_checkpoints_steps=20",
                           "--iterations_per_loop=20", "--dtype_policy=float32")
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    deadline = time.time() + 120
    while not (run / outputs.LOCK).exists():
        assert first.poll() is None and time.time() < deadline, first.communicate()[1][-3000:]
        time.sleep(0.01)
    second = subprocess.run(command, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    overlapped = first.poll() is None
    out, err = first.communicate(timeout=600)
    return (first.returncode, out, err), second, run, config, overlapped, first.pid


@pytest.mark.real_process
def test_a_second_run_on_a_live_runs_output_is_refused_naming_it_and_the_first_is_unaffected(two_runs):
    (code, out, err), second, run, _, overlapped, pid = two_runs
    assert overlapped, "the first run ended before the second one was checked"
    assert second.returncode == 2, second.stderr[-3000:]
    [line] = [line for line in second.stderr.splitlines() if line.startswith("run_pretraining: error: ")]
    holder = type("Holder", (), {"pid": pid})
    assert_names_the_holder(line, "--output_dir", run, holder, "run_pretraining")
    assert "A command that only reads the run" in line, line
    assert code == 0, err[-3000:]
    assert "initialized from" in out and "is being written" not in err and "takes it over" not in err
    assert sorted(p.name for p in run.glob("ckpt-*.index")) == ["ckpt-20.index", "ckpt-40.index"]
    assert not (run / outputs.LOCK).exists()  # let go when it ended


@pytest.mark.real_process
def test_evaluation_alone_and_an_export_read_the_newest_complete_checkpoint_of_a_run_being_written(
        two_runs, pretraining_records, spm_model, tmp_path):
    from albert_tf import export_tfhub, run_pretraining

    *_, run, config, _, _ = two_runs
    writer = start_holder("run_pretraining", [["--output_dir", str(run), outputs.RUN]])
    try:
        (run / "ckpt-60_temp").mkdir()  # the writer's save in progress: not a checkpoint yet
        (run / "ckpt-60_temp" / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"partial")
        args = pretrain_cmd(pretraining_records[0], run, config, "--nodo_train", "--do_eval", "--dtype_policy=float32")
        reader = run_in_process(run_pretraining, args[3:])
        assert reader.returncode == 0, reader.stderr[-3000:]
        assert f"evaluating the trained checkpoint {run / 'ckpt-40'} (step 40)" in reader.stdout, reader.stdout
        export = run_in_process(export_tfhub, [f"--checkpoint={run}", f"--albert_config_file={config}",
                                               f"--spm_model_file={spm_model}", f"--export_path={tmp_path / 'export'}",
                                               "--nowith_mlm", "--seq_length=16"])
        assert export.returncode == 0, export.stderr[-3000:]
        assert f"exported {run / 'ckpt-40'} to" in export.stdout, export.stdout
        assert writer.poll() is None and (run / outputs.LOCK).exists()  # the writer still holds the run
    finally:
        shutil.rmtree(run / "ckpt-60_temp")
        let_go(writer)
    assert not (run / outputs.LOCK).exists()


# ----------------------------------------------------------------------------------------------------------
# every writing command; readers; a holder that is gone


HELD = {  # command -> (output flag, kind) the holder takes
    "run_pretraining": ("--output_dir", outputs.RUN), "run_classifier": ("--output_dir", outputs.RUN),
    "run_squad_v1": ("--output_dir", outputs.RUN), "run_squad_v2": ("--output_dir", outputs.RUN),
    "run_race": ("--output_dir", outputs.RUN), "export_tfhub": ("--export_path", outputs.EXPORT),
    "convert": ("--output", outputs.CONVERSION), "create_pretraining_data": ("--output_file", outputs.PRETRAINING_DATA),
    "export_litert": ("--output", outputs.LITERT_MODEL)}


def _invocation(command, p, out):
    """(argv, held flag, held path, kind) of a valid invocation of `command` writing under `out`."""
    flag, kind = HELD[command]
    if command == "export_litert":
        fixed, defaults = [f"--init_checkpoint={os.path.dirname(p.checkpoint)}"], {flag: str(out / "model.tflite")}
    else:
        fixed, defaults = _arguments(command, p, out)
    return fixed + [f"{k}={v}" for k, v in defaults.items()], flag, defaults[flag], kind


@pytest.mark.real_process
@pytest.mark.parametrize("command", list(HELD))
def test_each_writing_command_refuses_an_output_a_live_process_holds(command, request, tmp_path):
    argv, flag, path, kind = _invocation(command, request.getfixturevalue("inputs"), tmp_path / "out")
    holder = start_holder("some_command", [[flag, path, kind]])
    try:
        before = _tree(tmp_path)
        module = "albert_tf.export_litert" if command == "export_litert" else COMMANDS[command]
        result = run_in_process(__import__(module, fromlist=["main"]), argv)
        assert result.returncode == 2, result.stderr[-3000:]
        [line] = result.stderr.strip().splitlines()
        assert line.startswith(f"{command}: error: "), line
        assert_names_the_holder(line, flag, path, holder, "some_command")
        assert _tree(tmp_path) == before  # refused before any work: nothing written
    finally:
        let_go(holder)
    assert not os.path.exists(outputs.lock_path(path, kind))  # the holder let go: nothing is left


@pytest.mark.real_process
@pytest.mark.parametrize("command,reading", [("run_pretraining", ["--nodo_train", "--do_eval"]),
                                             ("run_classifier", ["--nodo_train", "--do_eval"]),
                                             ("run_squad_v1", ["--nodo_train", "--do_predict"]),
                                             ("run_race", ["--nodo_train", "--do_predict"])])
def test_a_command_that_only_reads_the_run_is_not_refused(command, reading, request, tmp_path):
    """Evaluation or prediction alone passes the lock: it goes on to read its inputs (whose
    placeholders then stop it)."""
    placeholders = request.getfixturevalue("inputs")
    argv, flag, path, kind = _invocation(command, placeholders, tmp_path / "out")
    argv = [a for a in argv if not a.startswith(("--do_train", "--export_dir"))] + reading
    holder = start_holder(command, [[flag, path, kind]])
    try:
        _, err = run_command(command, argv)
        assert "is being written by" not in err and f"{command}: error: {placeholders.root}" in err, err
    finally:
        let_go(holder)


@pytest.mark.real_process
def test_a_sigkilled_holder_is_taken_over_with_a_message(sample_corpus, spm_model, tmp_path):
    from albert_tf import create_pretraining_data

    out = tmp_path / "data" / "train.tfrecord"
    holder = start_holder("create_pretraining_data", [["--output_file", str(out), outputs.PRETRAINING_DATA]])
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    where = outputs.lock_path(out, outputs.PRETRAINING_DATA)
    assert os.path.exists(where)  # the killed holder's record stays; the system let go of its lock
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(open(sample_corpus, encoding="utf-8").read()[:20_000], encoding="utf-8")
    result = run_in_process(create_pretraining_data, [
        f"--input_file={corpus}", f"--output_file={out}", f"--spm_model_file={spm_model}", "--max_seq_length=64",
        "--max_predictions_per_seq=10", "--dupe_factor=1", "--num_workers=1"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert (f"create_pretraining_data: --output_file={out}: its writer create_pretraining_data (process "
            f"{holder.pid} on this machine, {socket.gethostname()}), since ") in result.stderr, result.stderr
    assert "is gone without letting go of it; this command takes it over." in result.stderr
    assert out.exists() and not os.path.exists(where)


def test_a_worker_beside_its_chief_holds_nothing(monkeypatch):
    """The chief of a multi-worker cluster holds the outputs its workers share (TF_CONFIG's
    "chief" task, else worker 0); the other workers do not try."""
    def leads(task, cluster=None):
        cluster = cluster or {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
        monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": task}))
        return lock.leads("multi_worker_mirrored")

    assert leads({"type": "worker", "index": 0}) and not leads({"type": "worker", "index": 1})
    with_chief = {"chief": ["127.0.0.1:3"], "worker": ["127.0.0.1:1"]}
    assert leads({"type": "chief", "index": 0}, with_chief) and not leads({"type": "worker", "index": 0}, with_chief)
    assert lock.leads("default") and lock.leads("mirrored")
    monkeypatch.delenv("TF_CONFIG")
    assert lock.leads("multi_worker_mirrored")  # a cluster of one


def test_a_process_holds_its_own_output_once_and_lets_go_when_the_command_ends(tmp_path):
    """In one process a second hold of the same output is no conflict (a command calling
    another's code); the lock's directory, made for it, goes with it."""
    run = tmp_path / "new" / "run"
    with lock.command("x"):
        outputs.check([outputs.Output("--output_dir", str(run), outputs.RUN)])
        outputs.check([outputs.Output("--output_dir", str(run), outputs.RUN)])
        assert os.listdir(run) == [outputs.LOCK]
        assert outputs.examine(run, outputs.RUN).status == "new"  # its lock alone: still new
        with outputs.replacing_dir(str(run / "export"), outputs.EXPORT):  # beside: held while written
            assert {".export" + outputs.LOCK, outputs.LOCK} < set(os.listdir(run))  # and the export's temporary
        assert sorted(os.listdir(run)) == [outputs.LOCK, "export"]
    assert os.listdir(tmp_path / "new") == ["run"] and os.listdir(run) == ["export"]
    outputs.check([outputs.Output("--output_dir", str(tmp_path / "other"), outputs.RUN)])  # outside a command
    assert not (tmp_path / "other").exists()


# ----------------------------------------------------------------------------------------------------------
# the lease on an object store


GCS_SCRIPT = r'''
import json, os, signal, subprocess, sys, time
import gcs_emulator

with gcs_emulator.start(CERTS) as bucket:
    import tensorflow as tf
    from conftest import run_in_process
    from albert_tf import create_pretraining_data

    out = f"{bucket}/data/train.tfrecord"
    items = json.dumps([["--output_file", out, "pretraining_data"]])
    args = [f"--input_file={CORPUS}", f"--output_file={out}", f"--spm_model_file={SPM}", "--max_seq_length=64",
            "--max_predictions_per_seq=10", "--dupe_factor=1", "--num_workers=1"]
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "create_pretraining_data", items], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = {"held": holder.stdout.readline(), "pid": holder.pid}
    if results["held"] != "holding\n":
        holder.kill()
        raise SystemExit(holder.communicate()[1][-3000:])
    results["refused"] = run_in_process(create_pretraining_data, args).stderr
    time.sleep(2.5 * LEASE)  # longer than the lease: the holder renews it
    results["renewed"] = run_in_process(create_pretraining_data, args).stderr
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    results["after_kill"] = run_in_process(create_pretraining_data, args).stderr  # not stale yet
    time.sleep(LEASE + 1)
    taken = run_in_process(create_pretraining_data, args)
    results["taken"] = [taken.returncode, taken.stderr, sorted(tf.io.gfile.listdir(f"{bucket}/data"))]
    print("RESULTS " + json.dumps(results))
'''


@pytest.mark.real_process
def test_a_lease_on_gs_refuses_while_renewed_and_is_taken_over_once_stale(sample_corpus, spm_model, tmp_path):
    """The lease (a short LEASE_VARIABLE) against gcp-storage-emulator on loopback, in processes of
    their own: refused while its holder lives (past the lease's time: renewed), and after the
    holder is SIGKILLed, once stale, taken over with a message."""
    missing = None if shutil.which("openssl") else "openssl makes the emulator's certificate"
    if importlib.util.find_spec("gcp_storage_emulator") is None:
        missing = "gcp-storage-emulator is not installed"
    if missing:  # where the emulator is in the lock (requirements.txt), CI runs this test
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(missing)
        pytest.skip(missing)
    certs, corpus = tmp_path / "certs", tmp_path / "corpus.txt"
    certs.mkdir()
    corpus.write_text(open(sample_corpus, encoding="utf-8").read()[:20_000], encoding="utf-8")
    lease = 3
    script = (f"CERTS, CORPUS, SPM, LEASE = {str(certs)!r}, {str(corpus)!r}, {spm_model!r}, {lease}\n"
              f"HOLDER = {HOLDER!r}\n" + GCS_SCRIPT)
    env = dict(ENV, **{lock.LEASE_VARIABLE: str(lease)})
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    results = json.loads(lines[-1][len("RESULTS "):])
    assert results["held"] == "holding\n"
    out = "gs://trial/data/train.tfrecord"
    holder = type("Holder", (), {"pid": results["pid"]})
    for key in ("refused", "renewed", "after_kill"):
        [line] = results[key].strip().splitlines()
        assert line.startswith("create_pretraining_data: error: "), (key, line)
        assert_names_the_holder(line, "--output_file", out, holder, "create_pretraining_data")
    code, err, names = results["taken"]
    assert code == 0, err
    assert (f"--output_file={out}: its writer create_pretraining_data (process {results['pid']} on this machine"
            in err and "this command takes it over" in err), err
    assert "train.tfrecord" in names and not [n for n in names if n.endswith(outputs.LOCK)], names
