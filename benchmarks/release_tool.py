"""Runs the original release's create_pretraining_data.py (google-research/albert) as a baseline.

    python benchmarks/release_tool.py --launch RELEASE_DIR [the release tool's flags...]

`RELEASE_DIR` is a directory the user extracted from google-research/albert (its
create_pretraining_data.py, tokenization.py and __init__.py); nothing is downloaded and none of
the release's code is in this repository. `run_release_tool` runs it in a subprocess with the
release's flags and reports wall seconds, the instances written (records of the output file)
and the peak RSS of the process tree (`_tree_rss_kb` of create_pretraining_data_bench.py).

What the launcher changes, and why; the release's files are run unedited:
- The release imports `from albert import tokenization`, so its code must be importable as a
  package named `albert`. The launcher registers `albert` as a package whose path is
  RELEASE_DIR, whatever the directory is called, instead of asking for a parent directory
  holding a folder named `albert` on PYTHONPATH.
- tokenization.py imports tensorflow_hub at module level but uses it only for
  --albert_hub_module_handle (never passed here). When tensorflow_hub cannot be imported (it
  needs pkg_resources), an empty stand-in module takes its place; when it imports, it is used.
Nothing else: the release already uses `tensorflow.compat.v1` (tf.flags, tf.gfile,
tf.logging, tf.python_io and tf.app.run all still exist there on TensorFlow 2.21), its numpy
use (np.int64, np.random.choice) works on numpy 2, and six is installed as a dependency of
TensorFlow. Eager execution stays on: the tool runs no graph, only file I/O.

The release logs two INFO lines for every tokenize call (about 1.1 MB of log per dupe on the
1 MB corpus); they go to a temporary file, whose tail is raised when the tool fails. Its output
is not reproducible byte for byte even with --random_seed: the n-gram lengths of whole-word
masking come from numpy's global RNG, which the release never seeds. The instance count is.
"""

import os
import subprocess
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from create_pretraining_data_bench import _tree_rss_kb  # noqa: E402


def launch(release_dir, argv):
    """Runs the release's create_pretraining_data main in this process with argv as its flags."""
    import runpy

    package = types.ModuleType("albert")
    package.__path__ = [os.path.abspath(release_dir)]
    sys.modules["albert"] = package
    try:
        import tensorflow_hub  # noqa: F401
    except ImportError:
        sys.modules["tensorflow_hub"] = types.ModuleType("tensorflow_hub")
    sys.argv = [os.path.join(release_dir, "create_pretraining_data.py"), *argv]
    # alter_sys: the release's tf.app.run() takes sys.modules["__main__"].main, which must be the release's.
    runpy.run_module("albert.create_pretraining_data", run_name="__main__", alter_sys=True)  # exits


def count_records(path):
    import tensorflow as tf

    return sum(1 for _ in tf.data.TFRecordDataset(path))


def run_release_tool(release_dir, corpus, spm_model, vocab_file, output_file, max_seq_length=128,
                     max_predictions_per_seq=20, dupe_factor=5, timeout=1800, random_seed=12345):
    """Runs the release's tool with the release's flags; returns dict(wall_s, instances, peak_rss_mb).

    The flags are the release's README's: --do_lower_case --do_whole_word_mask --ngram=3,
    --masked_lm_prob=0.15. Raises RuntimeError when the tool fails, TimeoutError past timeout.
    """
    if not os.path.isfile(os.path.join(release_dir, "create_pretraining_data.py")):
        raise FileNotFoundError(f"{release_dir} holds no create_pretraining_data.py (extract google-research/albert)")
    cmd = [sys.executable, os.path.abspath(__file__), "--launch", release_dir,
           f"--input_file={corpus}", f"--output_file={output_file}", f"--spm_model_file={spm_model}",
           f"--vocab_file={vocab_file}", f"--max_seq_length={max_seq_length}",
           f"--max_predictions_per_seq={max_predictions_per_seq}", f"--dupe_factor={dupe_factor}",
           "--masked_lm_prob=0.15", f"--random_seed={random_seed}", "--do_lower_case", "--do_whole_word_mask",
           "--ngram=3"]
    with tempfile.TemporaryFile("w+") as log:
        start = time.time()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _tree_rss_kb(proc.pid))
            if time.time() - start > timeout:
                proc.kill()
                proc.wait()
                raise TimeoutError(f"the release's tool ran past {timeout} s")
            time.sleep(0.05)
        wall = time.time() - start
        if proc.returncode != 0:
            log.seek(max(0, log.tell() - 3000))
            raise RuntimeError(f"the release's tool failed (exit {proc.returncode}): {log.read()}")
    return {"wall_s": wall, "instances": count_records(output_file), "peak_rss_mb": peak / 1024}


def main(argv):
    if len(argv) > 2 and argv[1] == "--launch":
        launch(argv[2], argv[3:])
        return
    import argparse
    import json

    parser = argparse.ArgumentParser(description="Time the original release's create_pretraining_data.py.")
    parser.add_argument("--release_dir", required=True, help="Code extracted from google-research/albert.")
    parser.add_argument("--input_file", required=True)
    parser.add_argument("--spm_model_file", required=True)
    parser.add_argument("--vocab_file", required=True)
    parser.add_argument("--output_file", required=True)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--dupe_factor", type=int, default=5)
    a = parser.parse_args(argv[1:])
    result = run_release_tool(a.release_dir, a.input_file, a.spm_model_file, a.vocab_file, a.output_file,
                              a.max_seq_length, a.max_predictions_per_seq, a.dupe_factor)
    print(json.dumps(dict(result, corpus=a.input_file, corpus_bytes=os.path.getsize(a.input_file))))


if __name__ == "__main__":
    main(sys.argv)
