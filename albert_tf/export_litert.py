"""Exports an albert_tf model as a LiteRT (TensorFlow Lite) file for on-device use.

    python -m albert_tf.export_litert --init_checkpoint=runs/base --output=base.tflite \
        --quantization=dynamic_int8 [--max_seq_length=128] [--spm_model_file=spm.model]

--init_checkpoint is a model directory (albert_tf pretrained, SQuAD or multiple-choice,
e.g. from albert_tf.convert) or a run directory (a pretraining run; a fine-tuning run's
best, else newest, checkpoint): the encoder, or the fine-tuned classifier, SQuAD (v1 span
logits; v2 the release's beam and answerability logit) or multiple-choice model with its
head (albert_tf/export/litert_model.py lists the inputs and outputs). Writes OUTPUT (the
.tflite file), OUTPUT's stem + ".spm.model" (the SentencePiece model, for the app's
tokenizer) and stem + ".json" (inputs, outputs, the maximum length, the labels, and how
text becomes ids: the release's normalisation and digit-comma rule, with a test vector; and
"made_by": this command, its flags as given, albert_tf's version and source state,
TensorFlow/Keras and the device, albert_tf.storage.provenance). Each is
new or an earlier output of albert_tf's (replaced atomically); anything else, or an input,
is refused (exit 2) before anything is loaded. The file runs in the `ai_edge_litert`
interpreter; the tool runs it once on fixed ids and prints the largest difference from the
Keras model.
"""

import dataclasses
import json

from albert_tf import entry_points, option_flags
from albert_tf import extras
from albert_tf.storage.options import Command, LowerCase, ModelFiles, Output, option
from albert_tf.tasks.options import RunOptions
from albert_tf.storage import files

QUANTIZATIONS = ("none", "float16", "dynamic_int8")  # albert_tf.export.litert_model's (kept here: flags parse
# before TensorFlow is imported; tests/test_export_litert.py checks the two agree)


@dataclasses.dataclass(kw_only=True)
class LitertOptions:
    """export_litert's own flag (the rest are the fields it shares: RECORD)."""

    quantization: str = option("none", "none: float32 weights; float16: weights stored in float16; dynamic_int8: "
                                       "int8 weights, activations quantized at run time.", choices=QUANTIZATIONS)


RECORD = Command("export_litert", (
    (RunOptions, ("init_checkpoint",)), (Output, None), (LitertOptions, None), (RunOptions, ("max_seq_length",)),
    (ModelFiles, ("spm_model_file",)), (LowerCase, None)), defaults={"max_seq_length": 128})


def define_flags(flag_values=None):
    option_flags.define_command(flag_values, RECORD)


def check_options(f):
    """Every check of the command that needs no model, before anything is loaded: the flags
    (ValueError naming the flag) and the paths (check_paths). Returns the three outputs."""
    option_flags.values(f, RECORD)
    if not f.init_checkpoint:
        raise ValueError("--init_checkpoint is required (an albert_tf model directory or a run directory).")
    if not files.isdir(f.init_checkpoint):
        raise ValueError(f"--init_checkpoint={f.init_checkpoint} is not a directory (a model or run directory).")
    if f.max_seq_length < 2:
        raise ValueError(f"--max_seq_length must be at least 2, got {f.max_seq_length}.")
    paths = _paths(f)
    check_paths(f)
    return paths


def _paths(f):
    from albert_tf.export.litert_model import companion_paths

    output = f.output
    if not output or not output.endswith(".tflite"):
        raise ValueError(f"--output must name a .tflite file, got {output!r}.")
    return (output, *companion_paths(output))


def check_paths(f):
    """The three outputs: new or albert_tf's own, and apart from the inputs
    (albert_tf.storage.outputs); raises OutputRefused naming the flag. Writes nothing."""
    from albert_tf.storage import outputs

    model, spm, info = _paths(f)
    outputs.check([outputs.Output("--output", model, outputs.LITERT_MODEL),
                   outputs.Output("--output (its SentencePiece model)", spm, outputs.LITERT_SENTENCEPIECE),
                   outputs.Output("--output (its JSON)", info, outputs.LITERT_INFO)],
                  [outputs.Input("--init_checkpoint", f.init_checkpoint),
                   outputs.Input("--spm_model_file", f.spm_model_file)])


def run(f):
    output, spm_output, info_output = check_options(f)  # before TensorFlow starts
    extras.require("ai_edge_litert", "export_litert")  # it runs the written model (the package alone: no library loads)
    import keras
    import numpy as np

    keras.config.set_dtype_policy("float32")  # the LiteRT model computes in float32 (its weights may be quantized)
    from albert_tf.convert.api import load_source, spm_model_in
    from albert_tf.export.litert_model import litert_bytes, run_litert, serving_spec, sidecar, tokenization_record
    from albert_tf.modeling.encoder import INPUT_NAMES
    from albert_tf.storage import atomic, outputs, provenance

    made_by = provenance.record("export_litert", option_flags.given_flags(f))
    model = load_source("albert_tf", f.init_checkpoint)
    config = model.config
    if f.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length {f.max_seq_length} exceeds max_position_embeddings "
                         f"{config.max_position_embeddings}.")
    spm = f.spm_model_file or spm_model_in("albert_tf", f.init_checkpoint)
    if not spm or not files.isfile(spm):
        raise ValueError("--spm_model_file is required (the model's SentencePiece model; the input directory holds "
                         "none)" if not spm else f"--spm_model_file={spm} does not exist.")
    _, rank, names, fn = serving_spec(model)  # refuses a model with no LiteRT form before the conversion
    beam = max(model.start_n_top, model.end_n_top) if getattr(model, "version", None) == "v2" else 0
    if f.max_seq_length < beam:
        raise ValueError(f"--max_seq_length {f.max_seq_length} is below the SQuAD v2 beam ({beam}: start_n_top, "
                         "end_n_top): the file needs at least that many tokens.")
    print(f"converting {type(model).__name__} of {f.init_checkpoint} ({f.quantization})", flush=True)
    content = litert_bytes(model, f.quantization)

    # one run on fixed ids, against the Keras model
    length = min(16, f.max_seq_length)
    ids = (np.arange(length, dtype="int32") % max(1, config.vocab_size - 5) + 5).reshape((1,) * (rank - 1) + (length,))
    inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)}
    theirs = run_litert(content, inputs)
    ours = fn(*(inputs[n] for n in INPUT_NAMES))
    scores = [n for n in names if theirs[n].dtype.kind == "f"]  # (a v2 file's beam indices are compared apart)
    difference = max(float(np.abs(np.asarray(ours[n]) - theirs[n]).max()) for n in scores)
    indices = [n for n in names if n not in scores]
    same_indices = all(np.array_equal(np.asarray(ours[n]), theirs[n]) for n in indices)

    from albert_tf.data.tokenization import strip_machine_paths

    spm_bytes = strip_machine_paths(files.read_bytes(spm))
    info = sidecar(model, f.quantization, f.max_seq_length, getattr(model, "run_labels", None),
                   tokenization_record(spm, files.basename(spm_output), f.do_lower_case), made_by)
    info = (json.dumps(info, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    written = ((output, outputs.LITERT_MODEL, content), (spm_output, outputs.LITERT_SENTENCEPIECE, spm_bytes),
               (info_output, outputs.LITERT_INFO, info))
    for path, kind, data in written:
        with outputs.replacing_file(path, kind, "--output"):
            atomic.write_bytes(path, data)
    print(f"wrote {output} ({len(content):,} bytes), {spm_output} and {info_output}")
    print(f"LiteRT vs Keras on {length} fixed ids: largest difference {difference:.2e} ({', '.join(sorted(scores))})"
          + (f"; {', '.join(indices)} {'the same' if same_indices else 'differ'}" if indices else ""))
    return 0


main, entry = entry_points.command("export_litert", define_flags, run)


if __name__ == "__main__":
    entry()
