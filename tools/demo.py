"""The end-to-end demo behind `make demo`, on the built-in sample corpus.

    python tools/demo.py --output_dir=demo_output

Steps so far: sample corpus -> SentencePiece -> pretraining TFRecords (MLM + SOP) ->
a tf.data batch with dynamic masking -> pretraining (configs/demo.flags) with loss
curves -> TF-Hub-style export -> the exported encoder run through hub.KerasLayer on a
real sentence -> the parameter table. Each step prints what it did and how long it took;
results are written under --output_dir.
"""

import os
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, ROOT)

from absl import app, flags  # noqa: E402


def define_flags():
    """Defines this tool's flags (only when run as a script, so it can be imported)."""
    flags.DEFINE_string("output_dir", "demo_output", "Where the demo writes its files.")
    flags.DEFINE_integer("vocab_size", 5000, "SentencePiece vocabulary of the demo.")
    flags.DEFINE_integer("pretrain_steps", 800, "Pretraining steps (configs/demo.flags has 800).")


SENTENCE = "Return the first release in which this feature was recognized."


def _step(number, total, title, argv):
    print(f"\n[{number}/{total}] {title}", flush=True)
    start = time.time()
    subprocess.run([sys.executable, *argv], cwd=ROOT, check=True)
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


def read_batch(pattern, vocab_size, spm_model):
    """Reads one batch through the tf.data pipeline, re-masked in the graph."""
    from albert_tf.data.pipeline import DynamicMasking, pretraining_dataset
    from albert_tf.data.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(spm_model)
    ds = pretraining_dataset(pattern, batch_size=8, max_seq_length=128, max_predictions_per_seq=20,
                             dynamic_masking=DynamicMasking(vocab_size=vocab_size))
    batch = {k: v.numpy() for k, v in next(iter(ds)).items()}
    print("      " + ", ".join(f"{k} {v.shape}" for k, v in batch.items()))
    ids = batch["input_word_ids"][0][: batch["input_mask"][0].sum()]
    print(f"      example: {tokenizer.sp.DecodePieces([tokenizer.id_to_piece(i) for i in ids[:40]])} ...")
    print(f"      masked positions {batch['masked_lm_positions'][0][batch['masked_lm_weights'][0] > 0].tolist()}, "
          f"sentence-order label {batch['next_sentence_labels'][0, 0]}")


def main(argv):
    del argv
    out = os.path.abspath(flags.FLAGS.output_dir)
    os.makedirs(out, exist_ok=True)
    total = 8
    start = time.time()
    corpus = os.path.join(out, "sample_corpus.txt")
    _step(1, total, "sample corpus from installed Python docstrings",
          ["tools/make_sample_corpus.py", f"--output_file={corpus}"])
    prefix = os.path.join(out, "spm")
    _step(2, total, f"SentencePiece ({flags.FLAGS.vocab_size} pieces, the release's recipe)",
          ["tools/train_sentencepiece.py", f"--input_file={corpus}", f"--model_prefix={prefix}",
           f"--vocab_size={flags.FLAGS.vocab_size}"])
    records = os.path.join(out, "pretrain", "train.tfrecord")
    _step(3, total, "pretraining TFRecords (seq 128, dupe 2, 2 workers, 4 shards)",
          ["tools/create_pretraining_data.py", f"--input_file={corpus}", f"--output_file={records}",
           f"--spm_model_file={prefix}.model", "--max_seq_length=128", "--max_predictions_per_seq=20",
           "--dupe_factor=2", "--num_workers=2", "--num_output_shards=4"])
    print(f"\n[4/{total}] one tf.data batch with dynamic masking", flush=True)
    read_batch(records + "-*", flags.FLAGS.vocab_size, prefix + ".model")
    run_dir = os.path.join(out, "run")
    export_dir = os.path.join(out, "export")
    _step(5, total, "pretraining with LAMB (configs/demo.flags), then export",
          ["-m", "albert_tf.run_pretraining", "--flagfile=configs/demo.flags", f"--input_file={records}-*",
           f"--output_dir={run_dir}", f"--num_train_steps={flags.FLAGS.pretrain_steps}",
           f"--export_dir={export_dir}", f"--spm_model_file={prefix}.model"])
    _step(6, total, "loss and accuracy curves",
          ["tools/plot_metrics.py", f"--run_dir={run_dir}", f"--output={os.path.join(out, 'pretraining_curves.png')}"])
    print(f"\n[7/{total}] the exported encoder through hub.KerasLayer on a real sentence", flush=True)
    hub_forward_pass(export_dir)
    _step(8, total, "parameter table (paper Tables 1 and 5)",
          ["-m", "albert_tf.param_table", f"--output_dir={out}"])
    print(f"\ndemo finished in {time.time() - start:.0f}s; files in {out}")


if __name__ == "__main__":
    define_flags()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    app.run(main)
