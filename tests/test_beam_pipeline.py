"""create_pretraining_data --runner: the Apache Beam pipeline writes the local writer's bytes.

Beam's portable FnApiRunner in multi-process mode (--runner=DirectRunner) with 1 and 2
worker processes, on the fixed corpus and model of test_data_writer: the shards are the
local default's byte for byte (SOP data, and NSP data whose pool is a side input), the
summary the same but for how it ran. Bad runners and options exit 2 before any work; the
default path never imports Beam.
"""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from albert_tf import create_pretraining_data
from albert_tf.data.beam_pipeline import PipelineSettings, run_pipeline
from albert_tf.data.writer import write_pretraining_data
from albert_tf.storage import outputs
from conftest import run_in_process
from test_data_writer import CASES, ROOT, sha256, write_fixed_corpus, write_fixed_model

# what may differ between two runs of the same data: time, the machine, how it ran
RUN_KEYS = ("seconds", "instances_per_second", "execution", "made_by", "summary_file", "output_files")


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    d = tmp_path_factory.mktemp("fixed")
    corpus = write_fixed_corpus(str(d / "corpus.txt"))
    more = write_fixed_corpus(str(d / "more.txt"), documents=40, seed=3)
    return [corpus, more], write_fixed_model(str(d / "fixed.model"))


def same_run(a, b):
    drop = lambda s: {k: v for k, v in s.items() if k not in RUN_KEYS}
    assert drop(a) == drop(b)
    assert list(a["output_files"].values()) == list(b["output_files"].values())


@pytest.mark.parametrize("case,workers", [("A", 2), ("E", 1)])  # E: NSP negatives, the pool a side input
def test_direct_runner_writes_the_local_bytes(case, workers, fixed, tmp_path):
    inputs, model = fixed
    options, n, _ = CASES[case]
    local = [str(tmp_path / f"local-{k}.tfrecord") for k in range(n)]
    beam = [str(tmp_path / "beam" / f"beam-{k}.tfrecord") for k in range(n)]
    expected = write_pretraining_data(inputs, local, model, options, progress_stream=None)
    summary = run_pipeline(inputs, beam, model, dataclasses.replace(options, num_workers=workers),
                           PipelineSettings("DirectRunner", workers), progress_stream=None)
    assert [sha256(p) for p in beam] == [sha256(p) for p in local]
    same_run(summary, expected)
    assert summary["execution"]["runner"] == "DirectRunner" and summary["execution"]["num_workers"] == workers
    assert json.load(open(summary["summary_file"])) == {k: v for k, v in summary.items() if k != "summary_file"}
    left = [name for name in os.listdir(tmp_path / "beam") if not name.endswith(".albert_tf_output.json")]
    assert sorted(left) == sorted([os.path.basename(p) for p in beam] + ["summary_beam-0.tfrecord.json"])


def test_the_command_runs_the_pipeline_and_names_it(fixed, tmp_path):
    """Through main(argv): --runner=DirectRunner --num_workers=2 (with a Beam option of its
    own), the local command's bytes; a shard no record falls in is written empty."""
    inputs, model = fixed
    common = [f"--input_file={','.join(inputs)}", f"--spm_model_file={model}", "--max_seq_length=40",
              "--max_predictions_per_seq=7", "--dupe_factor=1", "--num_output_shards=2"]
    local = run_in_process(create_pretraining_data, [*common, f"--output_file={tmp_path}/l/t.tfrecord"])
    beam = run_in_process(create_pretraining_data, [*common, f"--output_file={tmp_path}/b/t.tfrecord",
                                                    "--runner=DirectRunner", "--num_workers=2",
                                                    "--beam_pipeline_options=direct_num_workers=2,job_name=cpd"])
    assert local.returncode == 0 and beam.returncode == 0, beam.stderr[-2000:]
    assert "running the Beam pipeline on DirectRunner with 2 workers" in beam.stderr
    for k in range(2):
        name = f"t.tfrecord-{k:05d}-of-00002"
        assert sha256(tmp_path / "b" / name) == sha256(tmp_path / "l" / name)
        for side in ("b", "l"):  # each file's size in its marker (the empty one's too), for its readers
            path = tmp_path / side / name
            assert outputs.read_marker(path, outputs.PRETRAINING_DATA)["size"] == os.path.getsize(path)
    summary = json.load(open(tmp_path / "b" / "summary_t.tfrecord.json"))
    assert summary["execution"]["beam_pipeline_options"] == ["--direct_num_workers=2", "--job_name=cpd"]
    assert summary["made_by"]["flags"]["runner"] == "DirectRunner"


def test_bad_runners_and_options_exit_2_before_any_work(fixed, tmp_path):
    inputs, model = fixed
    out = tmp_path / "out.tfrecord"
    base = [f"--input_file={inputs[0]}", f"--output_file={out}", f"--spm_model_file={model}", "--max_seq_length=40"]
    cases = [
        (["--runner=Prism"], "--runner=Prism: not a runner this command knows; use one of DirectRunner, FlinkRunner, "
                             "SparkRunner, DataflowRunner."),
        (["--beam_pipeline_options=project=p"], "--beam_pipeline_options needs --runner (e.g. "
                                                "--runner=DataflowRunner); without it the local writer runs."),
        (["--runner=DirectRunner", "--beam_pipeline_options=no_such_option=1"],
         "--beam_pipeline_options: Beam has no option --no_such_option=1; see `python -m "
         "apache_beam.examples.wordcount --help` for its options."),
        (["--runner=DirectRunner", "--beam_pipeline_options=project"],
         "--beam_pipeline_options: 'project' is not key=value (comma-separated pairs, e.g. "
         "project=my-project,region=us-central1)."),
        (["--runner=DirectRunner", "--beam_pipeline_options=runner=FlinkRunner"],
         "--beam_pipeline_options: runner=FlinkRunner contradicts --runner=DirectRunner; give the runner once, in "
         "--runner."),
        (["--runner=DirectRunner", "--num_workers=2", "--beam_pipeline_options=direct_num_workers=3"],
         "--beam_pipeline_options: direct_num_workers=3 contradicts --num_workers=2; give the count once, in "
         "--num_workers."),
        (["--runner=DirectRunner", "--num_workers=0"], "--num_workers=0: DirectRunner needs at least 1 worker."),
        (["--runner=FlinkRunner", "--beam_pipeline_options=direct_num_workers=2"],
         "--beam_pipeline_options: direct_num_workers is DirectRunner's, not FlinkRunner's."),
    ]
    for extra, message in cases:
        result = run_in_process(create_pretraining_data, [*base, *extra])
        assert result.returncode == 2, (extra, result.stderr[-1500:])
        assert result.stderr.strip().splitlines()[-1] == f"create_pretraining_data: error: {message}"
        assert "Traceback" not in result.stderr
        assert os.listdir(tmp_path) == []
    bad_value = run_in_process(create_pretraining_data, [*base, "--runner=DirectRunner",
                                                         "--beam_pipeline_options=direct_num_workers=two"])
    assert bad_value.returncode == 2 and "--beam_pipeline_options: Beam rejects --direct_num_workers=two" in \
        bad_value.stderr and os.listdir(tmp_path) == []


def test_strict_utf8_fails_the_run_naming_the_line(fixed, tmp_path):
    _, model = fixed
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(b"The value of the list is given.\nA name \xff of it.\nIt returns the first.\n")
    result = run_in_process(create_pretraining_data, [
        f"--input_file={corpus}", f"--output_file={tmp_path}/out/x.tfrecord", f"--spm_model_file={model}",
        "--max_seq_length=32", "--max_predictions_per_seq=4", "--strict_utf8", "--runner=DirectRunner"])
    assert result.returncode == 2, result.stderr[-1500:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"create_pretraining_data: error: {corpus}:2: not valid UTF-8 (1 such lines); fix the file or drop "
        "--strict_utf8 to skip such lines.")
    assert not (tmp_path / "out").exists()  # nothing written: not even the directory the output's lock made


@pytest.mark.real_process
def test_the_default_path_does_not_import_beam(fixed, tmp_path):
    """Only a fresh interpreter shows which modules a command imports."""
    inputs, model = fixed
    code = ("import sys; from albert_tf import create_pretraining_data as c; "
            f"status = c.main(['--input_file={inputs[1]}', '--output_file={tmp_path}/x.tfrecord', "
            f"'--spm_model_file={model}', '--max_seq_length=32', '--max_predictions_per_seq=4', '--dupe_factor=1']); "
            "print(status, 'apache_beam' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.stdout.split()[-2:] == ["0", "False"], result.stderr[-2000:]
