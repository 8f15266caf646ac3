"""The end-to-end demo behind `make demo`, on the built-in sample corpus.

    python tools/demo.py --output_dir=demo_output

The ten steps, what each prints and writes under --output_dir: docs/demo.md. --output_dir is the
demo's own directory: created when new, reused when the demo made it (a second `make demo` resumes
its runs and replaces what it made), refused (exit status 2) before any step when it is anything else.
"""

import contextlib
import dataclasses
import os
import re
import subprocess
import sys
import threading
import time

from albert_tf import entry_points, option_flags
from albert_tf.storage import outputs
from albert_tf.storage.json_files import read_json
from albert_tf.storage.options import Command, RunDirectory, VocabSize, option
from albert_tf.tasks.options import RunOptions
from albert_tf.training.precision import PrecisionOptions

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


@dataclasses.dataclass(kw_only=True)
class DemoOptions:
    """The demo's own flags (the rest are the fields it shares: RECORD; --dtype_policy is what
    pretraining and run_classifier compute in, the notebook's tf_keras model is float32)."""

    pretrain_steps: int = option(800, "Pretraining steps (configs/demo.flags has 800).")
    finetune_epochs: int = option(6, "Epochs of the notebook's hub.KerasLayer fine-tuning.")
    classifier_steps: int = option(600, "run_classifier training steps.")


# --random_seed: the seed of every random step (the pretraining data, pretraining, both fine-tunings)
RECORD = Command("demo", ((RunDirectory, None), (VocabSize, None), (DemoOptions, None), (RunOptions, ("random_seed",)),
                          (PrecisionOptions, None)), defaults={"output_dir": "demo_output", "vocab_size": 5000})


def define_flags(flag_values):
    """Defines this tool's flags (only when run as a script, so it can be imported)."""
    option_flags.define_command(flag_values, RECORD)


NOTEBOOK = os.path.join(ROOT, "notebooks", "finetune_with_hub.ipynb")
TOPICS = os.path.join(ROOT, "notebooks", "data", "docstring_topics")
TOPIC_LABELS = "networking,numbers,text,concurrency"
NEW_SENTENCES = ["Open a connection to the host and send the request headers.",
                 "Return the median of the numeric data.",
                 "Start a pool of worker processes and wait for the results."]
SENTENCE = "Return the first release in which this feature was recognized."


# The lines TensorFlow logs while it loads, before it reads TF_CPP_MIN_LOG_LEVEL (README, "TensorFlow's
# loading lines"): the demo leaves those below the level out of the stderr of the processes it starts.

_ABSL_HEADER = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_LOG_LINE = re.compile(r"([IWEF])\d{4} \d\d:\d\d:\d+(?:\.\d+)?\s+\d+ \S+:\d+\] ")
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}


def hidden_loading_line(line, level):
    """Whether `line` (a line of a process the demo started) is a TensorFlow log line below
    TF_CPP_MIN_LOG_LEVEL `level` (an int; 0 shows everything)."""
    if level >= 1 and line.rstrip("\r\n") == _ABSL_HEADER:
        return True
    match = _LOG_LINE.match(line)
    return bool(match) and _SEVERITY[match.group(1)] < min(level, 3)


def _min_log_level():
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def _copy_lines(source, level):
    with source:
        for line in iter(source.readline, b""):
            if not hidden_loading_line(line.decode("utf-8", "replace"), level):
                try:
                    os.write(2, line)
                except OSError:  # no stderr: drain the pipe all the same
                    pass


@contextlib.contextmanager
def filtered_stderr(level=None, wait_seconds=10):
    """A pipe to give a started process as its stderr: its lines reach file descriptor 2 as they come, less
    those `hidden_loading_line` leaves out at `level` (default TF_CPP_MIN_LOG_LEVEL); on exit, waits up to
    `wait_seconds` for the lines still to come."""
    read, write = os.pipe()
    level = _min_log_level() if level is None else level
    copier = threading.Thread(target=_copy_lines, args=(os.fdopen(read, "rb"), level), daemon=True)
    copier.start()
    with os.fdopen(write, "wb") as pipe:
        sys.stderr.flush()
        yield pipe
    copier.join(wait_seconds)


def _step(number, total, title, argv):
    print(f"\n[{number}/{total}] {title}", flush=True)
    start = time.time()
    with filtered_stderr() as stderr:
        result = subprocess.run([sys.executable, *argv], cwd=ROOT, stderr=stderr)
    if result.returncode:
        sys.exit(f"demo: step {number} failed with exit status {result.returncode}; its output is above.")
    print(f"      done in {time.time() - start:.1f}s", flush=True)


def hub_forward_pass(export_dir):
    """Runs the exported preprocessing and encoder models with tensorflow_hub."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401  (registers the preprocessing model's ops)

    preprocess = hub.KerasLayer(os.path.join(export_dir, "preprocess"))
    encoder = hub.KerasLayer(os.path.join(export_dir, "encoder"), trainable=True)
    inputs = preprocess(tf.constant([SENTENCE]))
    outputs = encoder(inputs)
    n = int(inputs["input_mask"][0].numpy().sum())
    print(f"      sentence: {SENTENCE}")
    print(f"      input_word_ids[:{n}]: {inputs['input_word_ids'][0, :n].numpy().tolist()}")
    print(f"      sequence_output {tuple(outputs['sequence_output'].shape)}, pooled_output "
          f"{tuple(outputs['pooled_output'].shape)}, {len(outputs['encoder_outputs'])} encoder_outputs; "
          f"{len(encoder.trainable_weights)} trainable weights")
    first = ", ".join(f"{v:+.4f}" for v in np.asarray(outputs["pooled_output"])[0, :4])
    print(f"      pooled_output[0, :4] = [{first}]")


def execute_notebook(nb, client_class=None, **options):
    """Executes notebook `nb` (outputs filled in place; returns it) with `client_class` (default
    NotebookClient) and its `options` in a local python3 kernel over IPC (Unix sockets in a private
    temporary directory: over TCP ipykernel warns that the traffic is unencrypted), its stderr through
    `filtered_stderr`; nbclient's CellExecutionError when a cell fails."""
    import tempfile

    from nbclient import NotebookClient

    client = (client_class or NotebookClient)(nb, kernel_name="python3", **options)
    with tempfile.TemporaryDirectory(prefix="albert_tf_kernel_") as sockets, filtered_stderr() as stderr:
        # set after construction, not passed as km=: the client then owns the kernel and shuts it down
        client.km = client.kernel_manager_class(kernel_name="python3", transport="ipc",
                                                ip=os.path.join(sockets, "kernel"))
        client.execute(stderr=stderr)
    return nb


def run_notebook(export_dir, out, epochs, seed):
    """Executes the fine-tuning notebook on the demo export, printing its output live."""
    import logging

    import nbformat
    from nbclient import NotebookClient

    logging.getLogger("traitlets").setLevel(logging.WARNING)  # nbclient's "Executing notebook..." line

    class LiveClient(NotebookClient):
        def output(self, outs, msg, display_id, cell_index):
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                for line in msg["content"]["text"].splitlines():
                    if line.strip():
                        print(f"      {line}", flush=True)
            return super().output(outs, msg, display_id, cell_index)

    finetune_dir = os.path.join(out, "finetune_hub")
    os.environ.update(ALBERT_EXPORT_DIR=export_dir, ALBERT_OUTPUT_DIR=finetune_dir, ALBERT_EPOCHS=str(epochs),
                      ALBERT_DATA_DIR=TOPICS, ALBERT_SEED=str(seed))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    execute_notebook(nb, LiveClient, timeout=1800, resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}})
    nbformat.write(nb, os.path.join(out, "finetune_with_hub.ipynb"))
    results = read_json(os.path.join(finetune_dir, "finetune_results.json"), "the notebook's results")
    print(f"      => dev accuracy {results['dev_accuracy']:.4f} beside the majority-class baseline "
          f"{results['majority_baseline']:.4f}; executed notebook {out}/finetune_with_hub.ipynb, curves "
          f"{finetune_dir}/finetune_curves.png")
    return results


def classify_new_sentences(export_dir):
    """The run_classifier export: raw strings in, labels out."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    model = tf.saved_model.load(export_dir)
    outputs = model(tf.constant(NEW_SENTENCES))
    for sentence, label, probabilities in zip(NEW_SENTENCES, outputs["label"].numpy(),
                                              outputs["probabilities"].numpy()):
        print(f"      {label.decode():>12} {probabilities.max():.2f}  {sentence}")


def read_batch(pattern, spm_model):
    """Reads one batch through the tf.data pipeline, re-masked in the graph."""
    from albert_tf.data.pipeline import DynamicMasking, pretraining_dataset
    from albert_tf.data.summary import read_data_summary
    from albert_tf.data.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(spm_model)
    ds = pretraining_dataset(pattern, batch_size=8, max_seq_length=128, max_predictions_per_seq=20,
                             dynamic_masking=DynamicMasking.from_summary(read_data_summary(pattern)))
    batch = {k: v.numpy() for k, v in next(iter(ds)).items()}
    print("      " + ", ".join(f"{k} {v.shape}" for k, v in batch.items()))
    ids = batch["input_word_ids"][0][: batch["input_mask"][0].sum()]
    print(f"      example: {tokenizer.sp.DecodePieces([tokenizer.id_to_piece(i) for i in ids[:40]])} ...")
    print(f"      masked positions {batch['masked_lm_positions'][0][batch['masked_lm_weights'][0] > 0].tolist()}, "
          f"sentence-order label {batch['next_sentence_labels'][0, 0]}")


def run(f):
    check_options(f)  # before any step
    out = os.path.abspath(f.output_dir)
    total = 10
    start = time.time()
    corpus = os.path.join(out, "sample_corpus.txt")
    _step(1, total, "the built-in sample corpus (docs/sample_corpus.md)",
          ["tools/make_sample_corpus.py", f"--output_file={corpus}"])
    prefix = os.path.join(out, "spm")
    _step(2, total, f"SentencePiece ({f.vocab_size} pieces, the release's recipe)",
          ["tools/train_sentencepiece.py", f"--input_file={corpus}", f"--model_prefix={prefix}",
           f"--vocab_size={f.vocab_size}"])
    records = os.path.join(out, "pretrain", "train.tfrecord")
    _step(3, total, "pretraining TFRecords (seq 128, dupe 2, 2 workers, 4 shards)",
          ["tools/create_pretraining_data.py", f"--input_file={corpus}", f"--output_file={records}",
           f"--spm_model_file={prefix}.model", "--max_seq_length=128", "--max_predictions_per_seq=20",
           "--dupe_factor=2", "--num_workers=2", "--num_output_shards=4", f"--random_seed={f.random_seed}"])
    print(f"\n[4/{total}] one tf.data batch with dynamic masking", flush=True)
    read_batch(records + "-*", prefix + ".model")
    run_dir = os.path.join(out, "run")
    export_dir = os.path.join(out, "export")
    _step(5, total, "pretraining with LAMB (configs/demo.flags), then export",
          ["-m", "albert_tf.run_pretraining", "--flagfile=configs/demo.flags", f"--input_file={records}-*",
           f"--output_dir={run_dir}", f"--num_train_steps={f.pretrain_steps}",
           f"--export_dir={export_dir}", f"--spm_model_file={prefix}.model", f"--random_seed={f.random_seed}",
           f"--dtype_policy={f.dtype_policy}"])
    _step(6, total, "loss and accuracy curves",
          ["tools/plot_metrics.py", f"--run_dir={run_dir}", f"--output={os.path.join(out, 'pretraining_curves.png')}"])
    print(f"\n[7/{total}] the exported encoder through hub.KerasLayer on a real sentence", flush=True)
    hub_forward_pass(export_dir)
    print(f"\n[8/{total}] fine-tuning through hub.KerasLayer (tf_keras): notebooks/finetune_with_hub.ipynb on the "
          "docstring-topics task", flush=True)
    step_start = time.time()
    notebook = run_notebook(export_dir, out, f.finetune_epochs, f.random_seed)
    print(f"      done in {time.time() - step_start:.1f}s", flush=True)
    classifier_dir = os.path.join(out, "classifier")
    _step(9, total, "fine-tuning with run_classifier (Keras 3) from the export, best dev checkpoint, raw-string export",
          ["-m", "albert_tf.run_classifier", "--task_name=tsv", f"--labels={TOPIC_LABELS}",
           "--text_a_column=sentence", f"--data_dir={TOPICS}", f"--albert_hub_module_handle={export_dir}",
           f"--output_dir={classifier_dir}", "--do_train", "--do_eval", "--max_seq_length=64",
           "--train_batch_size=32", "--eval_batch_size=64", "--optimizer=adamw", "--learning_rate=5e-4",
           f"--train_step={f.classifier_steps}", f"--warmup_step={f.classifier_steps // 10}",
           "--save_checkpoints_steps=100", "--iterations_per_loop=50", "--keep_checkpoint_max=2",
           f"--export_dir={os.path.join(classifier_dir, 'export')}", f"--random_seed={f.random_seed}",
           f"--dtype_policy={f.dtype_policy}"])
    classifier = _print_classifier_summary(classifier_dir)
    classify_new_sentences(os.path.join(classifier_dir, "export"))
    _step(10, total, "parameter table (paper Tables 1 and 5)",
          ["-m", "albert_tf.param_table", f"--output_dir={out}"])
    _write_results(f, out, notebook, classifier, time.time() - start)
    print(f"\ndemo finished in {time.time() - start:.0f}s; files in {out}")


def check_options(f):
    """Every check before any step: --dtype_policy and --output_dir, claimed as the demo's own."""
    from albert_tf.training.precision import check_policy

    check_policy(getattr(f, "dtype_policy", "auto"))  # (flag values made without it: the default)
    outputs.claim_dir(f.output_dir, outputs.DEMO, "--output_dir")


def _write_results(f, out, notebook, classifier, seconds):
    """Prints the two fine-tunings beside the majority baseline; writes them, the policy and the machine to
    demo_results.json."""
    import platform

    from albert_tf.storage import atomic
    from albert_tf.training import precision

    chosen = precision.choose(f.dtype_policy)
    results = {"random_seed": f.random_seed, "dtype_policy": f.dtype_policy, "resolved_policy": chosen.policy,
               "policy_reason": chosen.reason, "machine": chosen.hardware, "python": platform.python_version(),
               "notebook_dev_accuracy": notebook["dev_accuracy"], "run_classifier_dev_accuracy": classifier["accuracy"],
               "run_classifier_best_step": classifier["best_step"], "majority_baseline": notebook["majority_baseline"],
               "seconds": round(seconds, 1)}
    atomic.write_json(os.path.join(out, "demo_results.json"), results)
    print(f"\nfine-tuned from the same export ({chosen.policy}, seed {f.random_seed}): run_classifier "
          f"{results['run_classifier_dev_accuracy']:.4f}, notebook (hub.KerasLayer) "
          f"{results['notebook_dev_accuracy']:.4f}, majority-class baseline {results['majority_baseline']:.4f}; "
          f"{out}/demo_results.json")


def _print_classifier_summary(classifier_dir):
    summary = read_json(os.path.join(classifier_dir, "eval_results.json"), "run_classifier's eval results")
    print(f"      => dev accuracy {summary['accuracy']:.4f} (best, step {summary['best_step']}) beside the "
          f"majority-class baseline {summary['majority_baseline']['accuracy']:.4f}; curves "
          f"{classifier_dir}/training_curves.png")
    return summary


main, entry = entry_points.command("demo", define_flags, run)


if __name__ == "__main__":
    entry()
